"""Messages of the app: errors shown as one line (never a traceback), notices, empty and wrong-kind
explanations, and how checkpoint metrics and durations read."""

from __future__ import annotations

import contextlib
import logging
import math
import os
from pathlib import Path
from typing import Any, Iterator

import streamlit as st
from streamlit.runtime.scriptrunner_utils.exceptions import ScriptControlException

from app_pages import _data as data
from app_pages._state import K_CKPT, K_NOTICE, K_NOTICE_SHOWN, accept_standin, page_path, set_checkpoint
from geomlab.checkpoints import catalog
from geomlab.teach.views import VIEWS, ViewSpec

log = logging.getLogger("geomlab.app")


_MD_SPECIAL = set("\\`*_{}[]()<>#+-.!|~:$&^@/")


def md_escape(text: Any) -> str:
    """``text`` made literal for Streamlit markdown (``st.error``/``st.warning``/``st.markdown``/captions):
    every character markdown, GitHub's autolinks, HTML or LaTeX could act on is backslash-escaped, so a
    value from a URL, a file name or an uploaded card (``[x](http://...)``, ``**bold**``, ``<b>``,
    ``http://...``, ``$x$``, a backtick) shows as typed and never becomes a link or formatting. Newlines
    become spaces (one line)."""
    from geomlab.core.markup import escape_chars

    return escape_chars(text, _MD_SPECIAL)


def shown_folder(folder: Any) -> str:
    """A server folder as a page names it (markdown): relative to the app's working folder when inside it
    (``runs/``), so a shared link does not show the server's absolute paths; else the path as given, escaped
    (design choice)."""
    path = Path(folder).resolve()
    try:
        return md_escape(path.relative_to(Path.cwd().resolve()).as_posix() + "/")
    except ValueError:
        return md_escape(str(folder))


@contextlib.contextmanager
def guard(what: str = "This part of the page", prefix: str = "") -> Iterator[None]:
    """Show any error raised inside the block as a message in the page, never as a traceback.

    ``ValueError`` subclasses (bad input: ``DataError``, ``CheckpointError``, ``CatalogError``...) are shown
    as their one-line message (after ``prefix``, e.g. which side of Compare); anything else as ``what``
    failed plus the exception's one line, with the traceback sent to the server log. Streamlit's own control
    flow (``st.rerun``, ``st.stop``) passes through.
    """
    try:
        yield
    except ScriptControlException:
        raise
    except ValueError as exc:  # messages often quote user input (a ref, a file name): shown literally
        st.error(md_escape(prefix + (str(exc) or type(exc).__name__)), icon=":material/error:")
    except Exception as exc:  # noqa: BLE001 - the point is to never show a traceback
        log.exception("%s failed", what)
        st.error(md_escape(f"{what} failed: {type(exc).__name__}: {exc}. (Details are in the server log.)"),
                 icon=":material/error:")


def show_notice() -> None:
    """Show (once) a message left by state restoration, e.g. a link to a missing checkpoint."""
    msg = st.session_state.get(K_NOTICE)
    if msg:  # notices quote the link's values: shown literally, never as markdown
        st.warning(md_escape(msg), icon=":material/link_off:")
        st.session_state[K_NOTICE_SHOWN] = True


def no_checkpoint_message() -> None:
    """The empty-catalog message, with links to train or upload one."""
    st.info("No checkpoint is available yet. Train a tiny model in a minute on **Train live**, or upload "
            "a `.safetensors` + `.json` pair on **Checkpoints**.", icon=":material/info:")
    c1, c2 = st.columns(2)
    c1.page_link(page_path("train"), label="Train live", icon=":material/model_training:")
    c2.page_link(page_path("checkpoints"), label="Checkpoints", icon=":material/inventory_2:")


def wrong_kind_message(view: ViewSpec, entry: catalog.CheckpointEntry) -> None:
    """Explain that ``entry`` cannot be shown by ``view`` and offer fitting checkpoints."""
    st.warning(f"**{view.title}** shows {view.family} models ({', '.join(view.kinds)}); "
               f"the chosen checkpoint is a **{md_escape(entry.kind)}**.", icon=":material/swap_horiz:")
    fitting = [e for e in data.entries() if e.kind in view.kinds]
    if not fitting:
        st.caption("No such checkpoint is available: train one on Train live.")
        st.page_link(page_path("train"), label="Train live", icon=":material/model_training:")
        return
    cols = st.columns(min(3, len(fitting)))
    for i, e in enumerate(fitting[:6]):
        cols[i % len(cols)].button(f"Use {e.name}", key=f"use-{view.slug}-{e.ref}", on_click=set_checkpoint,
                                   args=(e.ref,), help=e.title)


#: view slug -> (what the view needs, what a kind it cannot show lacks: "{kind} has none"), for the
#: stand-in message; a view not listed reads "shows <family> models" (design choice)
VIEW_NEEDS = {
    "trajectories": ("a model whose hidden states live on a matrix group (OSM-RNN or OSMFormer)",
                     "{kind} has none"),
    "tangents": ("a model that updates its state in a Lie algebra (OSM-RNN or OSMFormer)", "{kind} does not"),
    "attention": ("a model with attention", "{kind} has none"),
    "energy": ("a causal energy minimisation (CEM) model, whose layers descend an energy", "{kind} has none"),
    "planes": ("a Grassmann flow model, which builds 2-planes from pairs of positions", "{kind} builds none"),
}

#: how a stand-in relates to the chosen checkpoint (geomlab.teach.views.related_kinds), as the message says it
RELATION_TEXT = {"same kind": "same kind", "same family": "same family",
                 "also recurrent": "also recurrent", "also attention-based": "also attention-based",
                 "": "this view's default: no related checkpoint is here"}


def why_not_this_view(view: ViewSpec, kind: str) -> str:
    """One sentence saying why ``view`` cannot show a checkpoint of ``kind``: "Attention similarity needs
    a model with attention; `osm-rnn` has none." (markdown; ``kind`` shown literally)."""
    needs = VIEW_NEEDS.get(view.slug)
    kind_md = f"`{kind.replace('`', '')}`"
    if needs is None:
        return f"**{view.title}** shows {view.family} models; {kind_md} is not one."
    return f"**{view.title}** needs {needs[0]}; " + needs[1].format(kind=kind_md) + "."


def standin_message(view: ViewSpec, chosen: catalog.CheckpointEntry, shown: catalog.CheckpointEntry,
                    how: str, others: list[tuple[catalog.CheckpointEntry, str]], explicit: bool = True) -> None:
    """The "not this view" message of a view page that shows ``shown`` in place of ``chosen`` (which it
    cannot show): why, what it shows instead and how the two are related (``how``), the views that do
    show ``chosen`` (links), and ``others``, the other checkpoints this view can show (``[(entry, how)]``,
    related first), as buttons that choose one. ``explicit``: the user chose ``chosen`` (a pick, a link),
    else it was the session's default."""
    relation = RELATION_TEXT.get(how, how)
    if not explicit:
        # a first visit: the user chose nothing, so nothing was swapped from their point of view; one quiet
        # line says what is shown and why (no silent switch), without the links of a real swap
        st.caption(f"Showing **{md_escape(shown.name)}** ({md_escape(shown.kind)}), a checkpoint "
                   f"**{view.title}** draws; the app's default, {md_escape(chosen.name)} ({md_escape(chosen.kind)}), "
                   "is on the pages that draw its kind. The sidebar picks any other.")
        return
    cols = st.columns([5, 1], vertical_alignment="center")
    cols[0].info(f"{why_not_this_view(view, chosen.kind)} Showing **{md_escape(shown.name)}** "
                 f"({md_escape(shown.kind)}, {relation}) instead of {md_escape(chosen.name)}, the selected "
                 "checkpoint.", icon=":material/swap_horiz:")
    cols[1].button("Keep it", key=f"w_standin_keep_{view.slug}", on_click=accept_standin,
                   help=f"Make {shown.name} the selected checkpoint (on every page); this message goes.")
    homes = [v for v in VIEWS.values() if chosen.kind in v.kinds]
    if homes:
        cols = st.columns([3] + [2] * len(homes), vertical_alignment="center")
        cols[0].caption(f"Open {md_escape(chosen.name)} in:")
        for col, v in zip(cols[1:], homes):
            # the short names: at a 1,000 px window "Attention similarity" was cut in its column
            col.page_link(page_path(v.slug), label=v.short, icon=v.icon, query_params={"ckpt": chosen.ref},
                          help=v.title)
    if others:
        checkpoint_choices("Other checkpoints this view can show (related ones first)", others[:10],
                           key=f"w_standin_{view.slug}")


def checkpoint_choices(label: str, choices: list[tuple[catalog.CheckpointEntry, str]], key: str,
                       which: str = K_CKPT) -> None:
    """Chips (``st.pills``, they wrap instead of cutting long names) offering ``choices`` (``[(entry,
    how related)]``, in order); picking one chooses it as state ``which`` (the checkpoint, or Compare's
    B)."""
    by_ref = {e.ref: (e, how) for e, how in choices}

    def fmt(ref: str) -> str:
        e, how = by_ref[ref]
        return e.name + (f" · {RELATION_TEXT.get(how, how)}" if how else "")

    def use() -> None:
        ref = st.session_state.get(key)
        if ref in by_ref:
            set_checkpoint(ref, which)

    st.pills(label, list(by_ref), format_func=fmt, key=key, on_change=use, selection_mode="single",
             help="Related first: same kind, same family, then the same way of mixing positions.")


METRIC_LABEL = {"BPC": "BPC ↓", "accuracy": "accuracy ↑"}


def fmt_metric(value: float | None) -> str:
    """A metric value for a table cell or a card line: three decimals, ``'–'`` when missing."""
    return "–" if value is None else f"{value:.3f}"


#: checkpoint tables (Checkpoints, Compare): the name column's width in pixels, the longest bundled name at
#: the table's font (design choice: the tables fit at 1000 px), and the steps column's help
NAME_WIDTH = 232
STEPS_HELP = ("training steps: the zoo's short-budget models have 800, its converged ones 10,000; compare "
              "like with like")


#: The Checkpoints table's columns (model = kind and group; trained = steps; the cards below show
#: parameters, corpus, source and ref; the data keeps every column). The numbers first, after the name:
#: at 800 px with the sidebar open the table scrolls, and what it hides then is the metric's unit and
#: the model kind, which the name says too (design choice).
TABLE_COLUMNS = ["name", "valid", "test", "trained", "metric", "model"]


def table_columns(phone: bool) -> list[str]:
    """The table's column order: :data:`TABLE_COLUMNS`, or on a phone (~390 px: the name and two more
    columns fit) the metric next to the name, so that valid and test are never read without their unit
    (BPC beside accuracy, the metric scrolled out of sight). Design choice."""
    if not phone:
        return list(TABLE_COLUMNS)
    return ["name", "metric"] + [c for c in TABLE_COLUMNS if c not in ("name", "metric")]


def summary_rows(found: list[catalog.CheckpointEntry]) -> list[dict[str, Any]]:
    """Table rows of :meth:`catalog.CheckpointEntry.summary` with the headline metric made readable: a
    ``metric`` column ("BPC ↓" for language models, "accuracy ↑" for word problems) and its ``valid`` /
    ``test`` values as text ('–' when the card has none, never ``None``), and ``trained``: the training steps
    as text (an 800-step model beside a 10,000-step one is not a like-for-like comparison)."""
    rows = []
    for e in found:
        row = e.summary()
        row["metric"] = METRIC_LABEL.get(row["metric"], row["metric"])
        row["valid"], row["test"] = fmt_metric(row["valid"]), fmt_metric(row["test"])
        row["trained"] = f"{row['steps']:,}" if isinstance(row.get("steps"), int) else "–"
        rows.append(row)
    return rows


def metric_facts(entry: catalog.CheckpointEntry) -> list[str]:
    """Markdown fragments of a card summary: ``valid BPC **2.464**``, ``test BPC 2.5`` or, for a word
    problem, ``valid accuracy **0.986**``, ``test accuracy 0.979`` (missing values left out)."""
    name, valid, test = entry.metric  # name is "BPC" or "accuracy" (never from the card)
    return [f for f in (f"valid {name} **{valid:.3f}**" if valid is not None else None,
                        f"test {name} {test:.3f}" if test is not None else None) if f]


def accuracy_by_length_line(entry: catalog.CheckpointEntry) -> str | None:
    """One line for a word-problem card: ``final-position accuracy by length (chance 1/120 = 0.008): L=2
    1.00 · … · L=128 0.36``; None for other checkpoints or a card without the curve."""
    curve = entry.accuracy_by_length
    if not entry.is_word_problem or not curve:
        return None
    n = entry.n_outputs
    chance = f" (chance 1/{n} = {1 / n:.3f})" if n else ""
    return (f"final-position accuracy by length{chance}: "
            + " · ".join(f"L={k} {v:.2f}" for k, v in curve.items()))


def fmt_seconds(s: float | None) -> str:
    """Compact duration for narrow metric tiles: ``75.2`` -> ``'1:15'``, ``3725`` -> ``'1:02:05'``,
    ``9`` -> ``'9 s'``; None/inf -> ``'–'``."""
    if s is None or not math.isfinite(s):
        return "–"
    s = int(round(s))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60}:{s % 60:02d}"
    return f"{s // 3600}:{(s % 3600) // 60:02d}:{s % 60:02d}"


def is_ci() -> bool:
    """Whether the environment says CI (``CI=1/true/yes``)."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")

