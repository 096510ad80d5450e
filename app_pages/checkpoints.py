"""Checkpoints: every bundled and user checkpoint with its card; upload a validated checkpoint."""

from __future__ import annotations

import json

import streamlit as st

from app_pages._data import forget_listing
from geomlab.checkpoints import catalog, uploads
from geomlab.checkpoints.files import checksums_line
from geomlab.teach import views
from app_pages import _ui as ui
from app_pages._messages import NAME_WIDTH, STEPS_HELP, md_escape, shown_folder
from app_pages._state import owner_token, restore_choice

K_DELETE_MSG = "_gl_delete_msg"      # a delete's outcome: shown at the top, above the cards
K_UPLOAD_RESULT = "_gl_upload_result"  # an upload's outcome: shown under the uploader, where the user is
K_PICK_MSG = "_gl_pick_msg"  # a refused Select or Open (weights changed since saved): shown at the top


def with_command(message: str) -> str:
    """A checkpoint message as markdown: its text escaped, the one command it quotes between backticks (how to
    record the weights' sum) shown as code."""
    parts = message.split("`")
    if len(parts) != 3:
        return md_escape(message)
    return f"{md_escape(parts[0])}`{parts[1]}`{md_escape(parts[2])}"


def _pick(ref: str, slug: str | None = None) -> None:
    """Select checkpoint ``ref`` (and open view ``slug``) unless it will not load: its weights changed since
    the save (checked again here: a file may change after the page was drawn); then nothing is selected and
    the loader's message is shown."""
    try:
        problem = catalog.weights_changed(catalog.resolve(ref))
    except ValueError as exc:  # gone or broken since the page was drawn
        problem = str(exc)
    if problem:
        st.session_state[K_PICK_MSG] = ("error", f"Not selected: {with_command(problem)}")
        return
    ui.set_checkpoint(ref)
    if slug:
        st.session_state["_gl_goto"] = slug


def _delete(ref: str) -> None:
    try:
        catalog.delete_user_checkpoint(ref, owner=owner_token())
        st.session_state[K_DELETE_MSG] = ("success", f"Deleted {md_escape(ref)}.")
    except ValueError as exc:
        st.session_state[K_DELETE_MSG] = ("error", md_escape(str(exc)))


def fitting_views(kind: str) -> list[views.ViewSpec]:
    """The view pages that show checkpoints of ``kind`` (from the view registry)."""
    return views.views_for_kind(kind)


def card(entry: catalog.CheckpointEntry, i: int) -> None:
    with st.container(border=True):
        # "yours": a checkpoint this session may delete; another session's save or upload, or a command
        # line run, is "in runs/"
        badge = ("bundled" if entry.source == "bundled" else "yours" if catalog.may_change(entry, owner_token())
                 else "in runs/")
        selected = st.session_state.get(ui.K_CKPT) == entry.ref
        changed = catalog.weights_changed(entry)
        st.markdown(f"**{md_escape(entry.name)}**  :gray-badge[{badge}]"
                    + ("  :green-badge[selected]" if selected else "")
                    + ("  :red-badge[changed since saved]" if changed else ""))
        if changed:
            st.error(with_command(changed))
        recipe = entry.card.get("recipe") if isinstance(entry.card.get("recipe"), dict) else {}
        if recipe.get("title"):
            st.markdown(f"*{md_escape(str(recipe['title']))}*")
        stored = entry.card.get("params_stored")
        extra = (f" ({stored:,} stored)" if isinstance(stored, int) and entry.params and stored != entry.params
                 else "")
        facts = [f"**{md_escape(entry.kind)}**" + (f" on **{md_escape(entry.group)}**" if entry.group else ""),
                 f"{entry.params:,} effective parameters{extra}" if entry.params else None, *ui.metric_facts(entry)]
        st.markdown(" · ".join(f for f in facts if f))
        if recipe.get("description"):
            st.caption(md_escape(str(recipe["description"])))
        by_length = ui.accuracy_by_length_line(entry)
        if by_length:
            st.caption(by_length)
        total, diverged = entry.card.get("total_steps"), entry.card.get("diverged_at")
        why = (f"paused: diverged at step {diverged['step']:,}" if isinstance(diverged, dict)
               and isinstance(diverged.get("step"), int) else "stopped early")
        of = (f" of {total:,} ({why})" if isinstance(total, int) and isinstance(entry.steps, int)
              and total > entry.steps else "")
        steps = f"{entry.steps:,}" if entry.steps is not None else "–"
        st.caption(f"corpus: {md_escape(entry.corpus)} · steps: {steps}{of} · {md_escape(entry.ref)}")
        fitting = fitting_views(entry.kind)
        deletable = catalog.may_change(entry, owner_token())  # only what this session created
        # a row that wraps (buttons as wide as their labels), so no label is cut in a half-width card
        row = st.container(horizontal=True, gap="small")
        refused = "Its weights changed since it was saved, so it does not load (the message above)."
        for v in fitting:
            row.button(v.short, key=f"open-{i}-{v.slug}", on_click=_pick, args=(entry.ref, v.slug),
                       icon=v.icon, disabled=bool(changed),
                       help=refused if changed else f"Open {md_escape(entry.name)} in {v.title}")
        if not fitting:
            row.button("Selected" if selected else "Select", key=f"select-{i}", on_click=_pick,
                       args=(entry.ref,), disabled=selected or bool(changed),
                       help=refused if changed else "A baseline with no geometry views of its own; use it on Compare.")
        if deletable:
            row.button("Delete", key=f"del-{i}", on_click=_delete, args=(entry.ref,), icon=":material/delete:",
                       type="tertiary", help="Remove this checkpoint's files from runs/.")
        with st.expander("Card and training config"):
            if entry.card.get("notes"):
                st.markdown(md_escape(str(entry.card["notes"])))
            st.caption(with_command(checksums_line(entry.meta)))
            st.json({"card": entry.card, "model_config": entry.model_config,
                     "train_config": entry.meta.get("train_config")}, expanded=1)


@st.cache_data(show_spinner=False, max_entries=4)
def _broken(signature: tuple) -> list[str]:
    """The reasons of :func:`geomlab.checkpoints.catalog.broken_checkpoints`, read again only when a
    checkpoint file changes (``signature``: :func:`geomlab.checkpoints.catalog.signature`)."""
    return [b.reason for b in catalog.broken_checkpoints()]


def show_message(key: str) -> None:
    """Show (once) the ``("success" | "error", text)`` an action left under ``key`` in the session."""
    msg = st.session_state.pop(key, None)
    if msg:
        (st.success if msg[0] == "success" else st.error)(msg[1])


def upload_section() -> None:
    st.subheader("Upload a checkpoint")
    st.markdown("A geomlab checkpoint is a Hugging Face folder `NAME/` holding `config.json` (the model "
                "config), `model.safetensors` (the weights), `vocab.json` (the vocabulary), `geomlab.json` (card, "
                "metrics, the sha256 of the weights, config, vocabulary and training state, checked on every "
                "load), `README.md` (the model card) "
                "and, for a run that can resume, "
                "`training_state.safetensors` and `training_state.json`. Select the folder's files together, or "
                "upload a `.zip` of the folder (it keeps the folder's name). Older checkpoints are a pair of files "
                "with one name, "
                "`NAME.safetensors` and `NAME.json`: select both. Pickled `.pt` files are not accepted: loading "
                "them could run code.")
    with st.form("upload", clear_on_submit=True, border=False):
        files = st.file_uploader("Checkpoint files", type=["safetensors", "json", "md", "zip"],
                                 accept_multiple_files=True, key="w_upload",
                                 help="A checkpoint folder's files, a .zip of the folder, or both halves of a "
                                      "flat pair.")
        submitted = st.form_submit_button("Validate and add", icon=":material/upload:")
    if submitted:
        handle_upload({f.name: f.getvalue() for f in (files or [])})
    show_message(K_UPLOAD_RESULT)


def handle_upload(files: dict[str, bytes]) -> None:
    """Validate and store an upload; the outcome is shown as a message (never a traceback)."""
    try:
        entry = uploads.store_upload(files, owner=owner_token())
        forget_listing()
    except ValueError as exc:  # the message quotes file names: shown literally
        st.session_state[K_UPLOAD_RESULT] = ("error", f"Upload rejected: {md_escape(exc)}")
    else:
        ui.set_checkpoint(entry.ref)
        st.session_state[K_UPLOAD_RESULT] = ("success", f"Added {md_escape(entry.title)} as `{entry.ref}`; it is "
                                          "now the selected checkpoint in every view.")
    st.rerun()


def main() -> None:
    ui.wait_warm()
    ui.show_notice()
    restore_choice("checkpoints")  # a view's stand-in is not the selection here
    goto = st.session_state.pop("_gl_goto", None)
    if goto:
        st.switch_page(ui.page_path(goto))
    st.title("Checkpoints")
    show_message(K_DELETE_MSG)
    show_message(K_PICK_MSG)
    found = ui.entries()
    st.caption("Bundled checkpoints come with geomlab (`assets/checkpoints/` in its repository); "
               f"yours from {shown_folder(catalog.runs_dir())} "
               "(set `GEOMLAB_RUNS_DIR` to look elsewhere). Runs saved on Train live appear here at once. "
               + ("This server shares every checkpoint between sessions (`GEOMLAB_SHARED_RUNS=1`)."
                  if catalog.shared_mode() else "You can delete the checkpoints this session uploaded or saved."))
    broken = _broken(catalog.signature())
    if broken:  # listed apart, so one broken file never hides the rest
        st.caption(f"Not listed, {len(broken)} checkpoint{'s' if len(broken) > 1 else ''} that cannot be read: "
                   + "; ".join(md_escape(reason) for reason in broken[:10]) + ("; …" if len(broken) > 10 else ""))
    if not found:
        ui.no_checkpoint_message()
    else:
        rows = ui.summary_rows(found)
        changed = [e.ref for e in found if catalog.weights_changed(e)]  # each sum once per file state
        for row in rows:
            row["model"] = row["kind"] + (f" · {row['group']}" if row["group"] else "")
            if row["ref"] in changed:
                row["name"] = "⚠ " + row["name"]
        if changed:
            st.caption(f"⚠ {len(changed)} checkpoint{'s' if len(changed) > 1 else ''} whose weights changed since "
                       "saved (a damaged copy, a replaced or edited file) and will not load: "
                       + ", ".join(md_escape(r) for r in changed) + "; the card says how to go on.")
        # the columns that compare checkpoints, at widths that fit beside the sidebar at 1000 px (the name not
        # pinned: Streamlit draws a pinned column's text pale); parameters, corpus, steps, source and ref are on
        # each card below
        # every row in view up to 30 (the zoo alone is 12: "auto" stops at 10 and scrolls), then a scroll
        st.dataframe(rows, hide_index=True, width="content", height="content" if len(rows) <= 30 else "auto",
                     column_order=ui.table_columns(ui.is_phone()), column_config={
            "name": st.column_config.TextColumn("name", width=NAME_WIDTH,
                                                help="the checkpoint's name; its card below has the rest (⚠: its weights changed "
                                                     "since saved, so it will not load)"),
            "model": st.column_config.TextColumn("model", width=112, help="model kind · group (OSM models)"),
            "metric": st.column_config.TextColumn(
                "metric", width=84,
                help="BPC (bits per character, lower is better) for language models; for group word "
                     "problems the accuracy of the running product over every position of the evaluation "
                     "sequences (higher is better; a card gives it at the last position too)"),
            "valid": st.column_config.TextColumn("valid", width=50, help="the metric on the validation split"),
            "test": st.column_config.TextColumn("test", width=50, help="the metric on the test split"),
            "trained": st.column_config.TextColumn("steps", width=60, help=STEPS_HELP),
        })
        # two cards a row, each row its own pair of columns: a narrow screen stacks each row's pair in turn,
        # so the cards keep the table's order there too (two long columns stacked put all left cards first)
        for i in range(0, len(found), 2):
            for j, col in enumerate(st.columns(2, gap="medium")):
                if i + j < len(found):
                    with col:
                        card(found[i + j], i + j)
    st.divider()
    upload_section()
    with st.expander("Where do checkpoint files come from?"):
        st.markdown("Save a run on **Train live**, or use the command line:\n\n"
                    "```bash\npython -m geomlab train --model osmformer --group O --data tinyshakespeare "
                    "--steps 2000 --out runs --name my-run\n```\n\nEvery run writes the folder `runs/my-run/`: "
                    "`config.json`, `model.safetensors`, `vocab.json`, `training_state.*`, `README.md` and "
                    "`geomlab.json`, such as")
        st.code(json.dumps({"format_version": 3, "card": {"corpus": "…"},
                            "tensors": {"embed.weight": {"shape": [], "dtype": "float32"}},
                            "files": {"model.safetensors": {"sha256": "…"}, "config.json": {"sha256": "…"},
                                      "vocab.json": {"sha256": "…"}}}, indent=1),
                language="json")


with ui.guard("The Checkpoints page"):
    main()
