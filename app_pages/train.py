"""Train live: train a tiny model in a background thread and watch it learn.

The script never trains: Start creates a :class:`geomlab.live.runner.LiveRun` in the process-wide registry and
returns; fragments (``st.fragment(run_every=...)``) poll its snapshot and redraw progress, the curves (other
runs of this server can be overlaid) and "Geometry now": the current weights traced on a short probe
sequence (:meth:`geomlab.live.runner.LiveRun.probe`, refreshed every few seconds while the run trains).
The form is :mod:`app_pages._train_form`, the curves and "Geometry now" :mod:`app_pages._train_charts`; this
script holds the run's panel (progress, Stop, Resume, Save), re-attaching to a run and the layout: with a run
on the page, the folded form and the recent runs in a row, then the curves beside the run's panel.
"""

from __future__ import annotations

import time

import streamlit as st

from geomlab.live import runner as live
from app_pages import _ui as ui
from app_pages._data import forget_listing
from app_pages._messages import md_escape, shown_folder
from app_pages._state import owner_token
from app_pages._train_charts import curves, geometry, unit
from app_pages._train_form import K_MSG, K_RUN, P, form

K_POLLING = "_gl_train_polling"
POLL_S = 0.7
# the curves and "Geometry now" redraw less often than the numbers: each redraw re-sends two or three charts,
# and the server's CPU is the training run's too (the weights are copied every geomlab.live.tap.PROBE_EVERY_S anyway)
FIGURES_POLL_S = 2.0
#: Polling period of a stopped or paused run that another session may resume (a watcher's page would
#: otherwise stay on "stopped" after the owner pressed Resume: nothing else reruns it)
WATCH_POLL_S = 2.0


def _stop(run_id: str) -> None:
    run = live.REGISTRY.get(run_id)
    try:
        if run is not None:
            run.stop(by=owner_token())
    except ValueError as exc:
        st.session_state[K_MSG] = ("error", md_escape(exc))


def _resume(run_id: str) -> None:
    run = live.REGISTRY.get(run_id)
    try:
        if run is not None:
            run.resume(by=owner_token())
    except ValueError as exc:
        st.session_state[K_MSG] = ("error", md_escape(exc))


def save_key(run_id: str) -> str:
    """Widget key of the "Save as" box (one per run, so each run starts with its own default name)."""
    return f"{P}save_name_{run_id}"


def _save(run_id: str) -> None:
    run = live.REGISTRY.get(run_id)
    name = (st.session_state.get(save_key(run_id)) or "").strip() or f"live-{run_id}"
    try:
        if run is None:
            raise live.LiveError("this run is no longer held by the server")
        from geomlab.checkpoints import catalog

        taken = catalog.runs_dir() / catalog.safe_name(name)
        existed = taken.exists() or taken.with_name(taken.name + ".json").exists()  # a folder or a flat pair
        path = run.save(name, by=owner_token())  # never over a checkpoint this session did not save
        forget_listing()
    except ValueError as exc:
        st.session_state[K_MSG] = ("error", md_escape(f"Could not save: {exc}"))
        return

    stem = path.with_suffix("") if path.suffix == ".json" else path  # the folder, or a flat pair's stem
    try:
        ref = "runs/" + stem.relative_to(catalog.runs_dir()).as_posix()
    except ValueError:
        ref = None
    if ref:
        ui.set_checkpoint(ref)
    where = f"`{ref}`" if ref else md_escape(stem)
    safe = catalog.safe_name(name)
    if stem.name == name:
        changed = " (replacing this session's earlier save of that name)" if existed else ""
    elif stem.name == safe:
        changed = (f" (the name {md_escape(name)} was changed to `{stem.name}`: only letters, digits, '-', "
                   "'\\_' and '.' are kept)")
    else:  # the (cleaned) name is another checkpoint's: never replaced, a free name is used
        changed = (f" (a checkpoint named `{safe}` already exists and is not this session's, so it was kept and "
                   f"this one saved as `{stem.name}`)")
    st.session_state[K_MSG] = ("success", f"Saved as {where}{changed}; it is now the selected checkpoint on "
                                          "every page.")


def curves_panel() -> None:
    """The run's training curves (several runs overlaid; a fragment, polling while the run trains)."""
    run = live.REGISTRY.get(st.session_state.get(K_RUN))
    if run is not None:
        curves(run, run.snapshot())


def geometry_panel() -> None:
    """"Geometry now", under the curves and the run's panel (a fragment, polling while the run trains)."""
    run = live.REGISTRY.get(st.session_state.get(K_RUN))
    if run is not None:
        st.subheader("Geometry now", anchor=False)
        geometry(run, run.snapshot())


def panel() -> None:
    """The live part of the page (a fragment; polling while a run is active)."""
    if K_MSG in st.session_state:
        # a button of this fragment (Save, Resume) left a message: only a full rerun shows it above the form
        # and mirrors a newly selected checkpoint into the URL (a fragment rerun skips app.py's URL sync)
        st.rerun(scope="app")
    run = live.REGISTRY.get(st.session_state.get(K_RUN))
    if run is None:
        st.info("No run on this page yet. Choose a model and data in the form and press **Start training**"
                + (", or pick a run above to watch it" if live.REGISTRY.recent(1) else "")
                + ". Training runs in the background on this server: you can switch pages and come back.",
                icon=":material/model_training:")
        return
    snap = run.snapshot()
    st.markdown(f"**{md_escape(run.spec.label())}** · {snap.params:,} parameters · state: **{snap.state}**"
                + (f" · on {snap.device}" if snap.device else ""))
    # the step and the time (left, or so far) in the bar's line: a row of tiles less keeps the Save row in
    # view at 1,000 x 800
    when = (f"about {ui.fmt_seconds(snap.eta_s)} left" if snap.active and snap.eta_s is not None else
            "" if snap.active else f"trained for {ui.fmt_seconds(snap.elapsed_s)}")
    st.progress(snap.fraction, text=f"step {snap.step:,} / {snap.total:,}" + (f" · {when}" if when else ""))
    # two tiles a row: three would be cut to "1.…" in the half-width column at 1,000 px
    label = {"bpc": "valid BPC", "accuracy": "valid accuracy"}.get(snap.metric_name, f"valid {snap.metric_name}")
    tiles = [("train loss", f"{snap.loss:.3f}" if snap.loss is not None else "–", f"nats per {unit(snap)}")]
    if snap.train_bpc is not None:
        tiles.append(("train BPC", f"{snap.train_bpc:.3f}", "bits per character"))
    tiles += [(label, f"{snap.metric:.3f}" if snap.metric is not None else "–", None),
              ("tokens/s", f"{snap.tokens_per_s:,.0f}" if snap.tokens_per_s else "–", None)]
    for i in range(0, len(tiles), 2):
        row = st.columns(2)
        for col, (name, value, hlp) in zip(row, tiles[i:i + 2]):
            col.metric(name, value, help=hlp)
    if snap.note:
        st.caption(snap.note)
    # a pause or an error is said under Stop / Resume (what it is about), so they stay in view at 1,000 x 800
    if snap.state == "finished":  # a caption, not a box: the Save row under it stays in view at 1,000 x 800
        st.caption(f":material/check_circle: {md_escape(snap.message)}")
    elif snap.message and snap.state not in ("paused", "error"):
        st.caption(snap.message)
    mine = run.may_change(owner_token())
    if not mine:
        st.caption("This run was started in another browser session: you can watch it here, but only that "
                   "session can stop, resume or save it (a server started with `GEOMLAB_SHARED_RUNS=1` shares "
                   "every run).")
    b = st.columns(2)
    b[0].button("Stop", icon=":material/stop:", on_click=_stop, args=(run.run_id,),
                disabled=snap.state != "running" or not mine,
                key="train-stop", width="stretch", help="Stop after the current step; Resume continues from there.")
    b[1].button("Resume", icon=":material/play_arrow:", on_click=_resume, args=(run.run_id,),
                disabled=not snap.can_resume or not mine, key="train-resume", width="stretch")
    if snap.state == "paused":
        st.warning(snap.message, icon=":material/pause_circle:")
    elif snap.state == "error":
        st.error(snap.message, icon=":material/error:")
    default_name = f"{run.spec.kind}{'-' + run.spec.group if run.spec.group else ''}-{run.run_id[:6]}"
    s = st.columns([3, 2], vertical_alignment="bottom")  # [3, 1] would cut the Save button to its icon at 1,000 px
    s[0].text_input("Save as", value=default_name, key=save_key(run.run_id), placeholder="checkpoint name",
                    help="Saves the current weights as the Hugging Face folder runs/NAME/ (config.json, "
                         "model.safetensors, vocab.json, a README.md model card and geomlab.json), so every page can use them; characters other than letters, digits, '-', '_' and '.' become '-'.")
    s[1].button("Save", icon=":material/save:", on_click=_save, args=(run.run_id,),
                disabled=snap.state == "created" or not mine,
                key="train-save", width="stretch")  # no tooltip: it would cover the help icon of "Save as"
    for path in snap.saved[-3:]:
        st.caption(f"saved: {shown_folder(path)}")  # relative to the app: a shared link shows no server path
    if bool(st.session_state.get(K_POLLING)) != snap.active:
        # the run started or ended since the last full run (e.g. Resume clicked inside this fragment):
        # rerun the whole page so the fragment starts/stops polling and the form is enabled/disabled
        st.session_state[K_POLLING] = snap.active
        st.rerun(scope="app")


def attach_from_url() -> None:
    """Adopt ``?run=ID`` from the URL when this session has no run yet (a reload starts a new session;
    the run itself lives on in the server's registry)."""
    ss = st.session_state
    rid = st.query_params.get("run")
    if rid and not ss.get(K_RUN):
        run = live.REGISTRY.get(rid)
        if run is not None:
            ss[K_RUN] = rid  # control stays with its owner's browser (the cookie, _state.owner_token)
        elif live.held_before(rid):
            ss[K_MSG] = ("error", f"Run {md_escape(repr(rid))} is no longer held by this server (it was "
                                  f"restarted); its working files stay in runs/.live/{rid}/. Start a new run.")
        else:
            ss[K_MSG] = ("error", f"No run {md_escape(repr(rid))} on this server: the link's run id is not one "
                                  "it started (mistyped, or from another server). Start a new run.")


def _attach(key: str) -> None:
    rid = st.session_state.get(key)
    if rid and live.REGISTRY.get(rid) is not None:
        st.session_state[K_RUN] = rid


def recent_runs() -> None:
    """"Recent runs on this server": re-attach to a run started earlier (e.g. before a page reload)."""
    runs = live.REGISTRY.recent(10)
    current = st.session_state.get(K_RUN)
    if not runs or (len(runs) == 1 and runs[0].run_id == current):
        return
    # no state or step in the label: the picker is drawn once per page run, so they would go stale while the
    # run trains (a finished run would read "running" until the next page run); the attached run's panel shows them
    labels = {r.run_id: f"{r.spec.label()} · started {time.strftime('%H:%M:%S', time.localtime(r.created_at))} "
                        f"· {r.run_id[:6]}" for r in runs}
    ids = list(labels)
    key = P + "recent"
    if st.session_state.get(key) not in ids or (current in ids and st.session_state.get(key) != current):
        st.session_state[key] = current if current in ids else None
    st.selectbox("Recent runs on this server", ids, key=key, index=None, format_func=labels.get,
                 placeholder="re-attach to a run started earlier…", on_change=_attach, args=(key,),
                 help="Runs live as long as the server: after a reload, pick yours to watch, resume or save it.")


def main() -> None:
    ui.wait_warm()
    ui.show_notice()
    st.title("Train live")
    st.caption("Train a tiny model in the background and watch its loss fall; then save it and look inside it "
               "on the view pages.")
    attach_from_url()
    msg = st.session_state.pop(K_MSG, None)
    if msg:
        (st.success if msg[0] == "success" else st.error)(msg[1])
        if msg[0] == "success":
            ref = st.session_state.get(ui.K_CKPT)
            entry = ui.entry_for(ref)
            if entry is not None:
                for v in ui.VIEWS.values():
                    if entry.kind in v.kinds:
                        st.page_link(ui.page_path(v.slug), label=f"Open it in {v.title}", icon=v.icon,
                                     query_params={"ckpt": ref})
                        break
    run = live.REGISTRY.get(st.session_state.get(K_RUN))
    snap = run.snapshot() if run is not None else None
    active = snap is not None and snap.active
    # a run that can still go on (stopped, paused) is watched slowly: its owner may resume it elsewhere
    waiting = snap is not None and not active and snap.can_resume
    if run is not None:  # a reload re-attaches to this run (and its owner's browser keeps control of it)
        st.session_state[ui.K_PAGE_QP] = {"run": run.run_id}
    st.session_state[K_POLLING] = active
    every = POLL_S if active else WATCH_POLL_S if waiting else None
    if run is None:
        left, right = st.columns([1, 1], gap="large")  # [2, 3] would cut the form's selects at 1,000 px
        with left, st.container(border=True):
            form(active)
        with right:
            recent_runs()
            st.fragment(panel, run_every=every)()
        return
    # a run on the page: the form for the next one folded in a row of its own, then the run's curves beside its
    # panel (numbers, Stop, Resume, Save), so the curves are in view at 1,000 x 800 and 1,400 x 900, during
    # training and after it; "Geometry now" under both
    top = st.columns([1, 1], gap="large")
    # keyed by the run: each new run's page starts with the form folded (an open form would push the
    # new run's curves below the fold), and the form stays open while it is used
    with top[0], st.expander("Next run's settings", icon=":material/tune:", key=f"train-next-{run.run_id}",
                             on_change="rerun"):
        form(active)
    with top[1]:
        recent_runs()
    left, right = st.columns([3, 2], gap="medium")
    with left, st.container(key="train-curves-col"):
        st.fragment(curves_panel, run_every=FIGURES_POLL_S if active else None)()
    with right, st.container(key="train-panel"):
        st.fragment(panel, run_every=every)()
    st.fragment(geometry_panel, run_every=FIGURES_POLL_S if active else None)()


with ui.guard("The Train live page"):
    main()
