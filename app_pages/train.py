"""Train live: train a tiny model in a background thread and watch it learn.

The script never trains: Start creates a :class:`geomlab.live.runner.LiveRun` in the process-wide registry and
returns; fragments (``st.fragment(run_every=...)``) poll its snapshot and redraw progress, the curves (other
runs of this server can be overlaid) and "Geometry now": the current weights traced on a short probe
sequence (:meth:`geomlab.live.runner.LiveRun.probe`, refreshed every few seconds while the run trains).
"""

from __future__ import annotations

import time

import plotly.graph_objects as go
import streamlit as st

from geomlab.live import runner as live
from geomlab.training import runs
from geomlab.data.vocab import decode_text
from app_pages import _ui as ui
from app_pages._messages import md_escape, shown_folder
from app_pages._state import owner_token

K_RUN = "gl_live_run"          # this session's current run id (owned state)
K_MSG = "_gl_train_msg"        # (level, text) shown once above the form
K_POLLING = "_gl_train_polling"
POLL_S = 0.7
# the curves and "Geometry now" redraw less often than the numbers: each redraw re-sends two or three charts,
# and the server's CPU is the training run's too (the weights are copied every geomlab.live.tap.PROBE_EVERY_S anyway)
FIGURES_POLL_S = 2.0
#: Polling period of a stopped or paused run that another session may resume (a watcher's page would
#: otherwise stay on "stopped" after the owner pressed Resume: nothing else reruns it)
WATCH_POLL_S = 2.0
GROUPS = ("O", "SO", "U", "SU", "T", "O-block")
GROUP_HELP = ("O: orthogonal, SO: rotations, U: unitary (complex), SU: special unitary, T: torus (commuting "
              "phases), O-block: block-diagonal orthogonal.")
DATA_KINDS = ("Synthetic task", "Registered corpus", "Your text")
P = "w_train_"  # widget key prefix (widgets keep their values for the session)
# Newcomer defaults (the app preset, geomlab.training.runs.PRESETS): osm-rnn, group O, 20k, word problem in Z5,
# 200 steps, sequence length 8, lr 0.01. Measured on the 2-core dev box (1 thread, seeds 0 and 1): valid accuracy
# 0.37 -> 0.80 and 0.36 -> 0.89 (chance 0.20), train loss 1.9 -> 0.5 / 1.7 -> 0.3 nats per symbol in 200 steps
# (a few seconds); S3 at length 32 and lr 0.003 stays at chance (accuracy 0.18 -> 0.19).
APP = runs.RunSpec.preset("app")
DEFAULT_TASK = APP.data.split(":")[1]
#: The form's starting values (set in the session state before its widgets are drawn): the app preset's
FORM_DEFAULTS = {P + "params": APP.params, P + "task": DEFAULT_TASK, P + "steps": APP.steps,
                 P + "batch": APP.batch_size, P + "seq": APP.seq_len, P + "lr": APP.lr, P + "seed": APP.seed}


@st.cache_data(ttl=30, show_spinner=False)
def corpus_status() -> dict[str, str | None]:
    return live.corpus_availability()


def model_kinds() -> list[str]:
    """The kinds the form offers, family by family in the records' order, each paper's baselines last."""
    from geomlab.teach.kinds import kinds_where

    return kinds_where(lambda cls: not cls.baseline) + kinds_where(lambda cls: cls.baseline)


def spec_from_widgets() -> live.RunSpec:
    """Read the form's widgets into a RunSpec (raises ValueError for an incomplete choice)."""
    ss = st.session_state
    kind = ss[P + "kind"]
    source = ss[P + "source"]
    text = None
    if source == "Synthetic task":
        data = "word-problem:" + ss[P + "task"]
    elif source == "Registered corpus":
        name = ss.get(P + "corpus")
        if not name:
            raise ValueError("No registered corpus is available on this machine.")
        reason = corpus_status().get(name)
        if reason:
            raise ValueError(f"Corpus {name} is not on this machine: {reason}")
        data = "corpus:" + name
    else:
        data = "text"
        up = ss.get(P + "upload")
        if up is not None:
            text = decode_text(up.getvalue(), source=up.name)  # DataError (a ValueError) when not UTF-8
        else:
            text = ss.get(P + "text") or ""
        if not text.strip():
            raise ValueError("Your text is empty: paste some text or upload a .txt file (at least 100 characters).")
    return live.RunSpec.preset(
        "app", kind=kind, group=ss.get(P + "group") if live.is_osm(kind) else None, params=int(ss[P + "params"]),
        data=data, text=text, steps=int(ss[P + "steps"]), device=ss[P + "device"],
        batch_size=int(ss[P + "batch"]), seq_len=int(ss[P + "seq"]), lr=float(ss[P + "lr"]),
        seed=int(ss[P + "seed"]), threads=live.default_threads())


def start() -> None:
    """Start button callback: build and start a run; errors become a message."""
    try:
        spec = spec_from_widgets()
        token = owner_token()
        log_dir = live.tensorboard_dir(spec) if st.session_state.get(P + "tensorboard") else None
        run = live.REGISTRY.create(spec, owner=token, log_dir=log_dir)  # only this session may stop/resume/save it
        run.start(by=token)
    except ValueError as exc:
        st.session_state[K_MSG] = ("error", md_escape(exc))
        return
    except Exception as exc:  # noqa: BLE001 - shown, never raised
        st.session_state[K_MSG] = ("error", md_escape(f"Could not start the run: {type(exc).__name__}: {exc}"))
        return
    st.session_state[K_RUN] = run.run_id


def task_label(key: str) -> str:
    """A synthetic task's short name for the Task select ("Z5 word problem"; the full description of
    :data:`geomlab.live.runner.SYNTHETIC_TASKS` is the caption under it: the long one was cut at a 1,000 px window)."""
    desc = live.SYNTHETIC_TASKS[key]
    return f"{key} word problem" if desc.startswith("word problem") else desc.split(" (")[0]


def spec_settings(spec: runs.RunSpec) -> dict[str, object]:
    """The form's widget values (keys ``w_train_*``) that would start a run like ``spec``: what a visitor
    watching a run (someone else's, or their own after a reload) can copy into the form. Only what the form
    can express: a budget it does not list, or a task string it does not offer, is left out."""
    out: dict[str, object] = {P + "kind": spec.kind, P + "steps": int(spec.steps), P + "device": spec.device,
                              P + "batch": int(spec.batch_size), P + "seq": int(spec.seq_len),
                              P + "lr": float(spec.lr), P + "seed": int(spec.seed)}
    if live.is_osm(spec.kind) and spec.group in GROUPS:
        out[P + "group"] = spec.group
    if spec.params in live.BUDGETS:
        out[P + "params"] = int(spec.params)
    kind, _, rest = spec.data.partition(":")
    if kind in ("word-problem", "task") and rest.split(":")[0] in live.SYNTHETIC_TASKS:
        out.update({P + "source": DATA_KINDS[0], P + "task": rest.split(":")[0]})
    elif kind == "corpus" and rest:
        out.update({P + "source": DATA_KINDS[1], P + "corpus": rest})
    elif spec.data == "text" and spec.text:
        out.update({P + "source": DATA_KINDS[2], P + "text": spec.text})
    return out


def _use_settings(run_id: str) -> None:
    run = live.REGISTRY.get(run_id)
    if run is not None:
        st.session_state.update(spec_settings(run.spec))


def form(active: bool) -> None:
    run = live.REGISTRY.get(st.session_state.get(K_RUN))
    if run is not None:
        want = spec_settings(run.spec)
        if any(st.session_state.get(k) != v for k, v in want.items()):
            # the form is for the next run: after a reload, or watching someone else's run, it shows the
            # defaults, which read as if they were that run's settings
            st.caption("This form starts a new run; its settings are not those of the run shown.")
            st.button("Use the shown run's settings", icon=":material/content_copy:", key=P + "use_settings",
                      on_click=_use_settings, args=(run.run_id,),
                      help="Fill the form with the settings of the run on the right (model, data, steps, "
                           "batch, length, learning rate, seed).")
    # defaults through the session state, not the widgets' value=/index= (a widget given both a default and a
    # session value, as "Use the shown run's settings" sets, makes Streamlit log a warning)
    for k, v in FORM_DEFAULTS.items():
        st.session_state.setdefault(k, v)
    kinds = model_kinds()
    # one select per row: two per row cut the options ("osm-rn") in the form's column at a 1,000 px window
    c1, c2 = st.container(), st.container()
    c1.selectbox("Model kind", kinds, key=P + "kind", persist_state="session",
                 help="osm-rnn/osmformer: states on a matrix group; cem: energy-descent layers; grassmann: "
                      "plane-mixing layers; transformer, llama, lstm: baselines.")
    kind = st.session_state[P + "kind"]
    if live.is_osm(kind):
        c2.selectbox("Group", GROUPS, key=P + "group", persist_state="session", help=GROUP_HELP)
    else:
        c2.selectbox("Group", ["—"], disabled=True, key=P + "group_na",
                     help="Only the orthogonal-state models (osm-rnn, osmformer) have a group.")
    st.select_slider("Parameter budget", options=list(live.BUDGETS), key=P + "params",
                     persist_state="session", format_func=lambda n: f"{n // 1000}k",
                     help="Effective trainable parameters; the model's width is chosen to match (±5%).")
    st.radio("Data", DATA_KINDS, key=P + "source", horizontal=True, persist_state="session",
             help="Synthetic tasks need no download. Registered corpora are used only when their files are "
                  "on this machine (GEOMLAB_DATA_DIR).")
    source = st.session_state[P + "source"]
    if source == "Synthetic task":
        tasks = list(live.SYNTHETIC_TASKS)
        st.selectbox("Task", tasks, key=P + "task", persist_state="session",
                     format_func=task_label,
                     help="The group word problem: read group elements, predict their running product.")
        desc = live.SYNTHETIC_TASKS[st.session_state[P + "task"]]
        st.caption(desc[0].upper() + desc[1:] + ".")
    elif source == "Registered corpus":
        status = corpus_status()
        avail = [n for n, r in status.items() if r is None]
        if not avail:
            st.warning("No registered corpus is on this machine. Put the files under the folder named by "
                       "`GEOMLAB_DATA_DIR` (see `docs/pipeline.md`), or use a synthetic task or your own text.",
                       icon=":material/folder_off:")
        else:
            st.selectbox("Corpus", avail, key=P + "corpus", persist_state="session")
            missing = [n for n, r in status.items() if r is not None]
            if missing:
                st.caption("Not on this machine: " + ", ".join(missing))
    else:
        st.file_uploader("Upload a UTF-8 text file", type=["txt", "md", "csv", "py"], key=P + "upload")
        st.text_area("…or paste text (at least 100 characters)", key=P + "text", height=100,
                     persist_state="session")
    c1, c2 = st.columns(2)
    c1.number_input("Steps", 1, runs.MAX_STEPS, step=50, key=P + "steps", persist_state="session",
                    help="Optimizer steps. The default 200 take a few seconds on a CPU; larger models, longer "
                         "sequences and corpora take longer (the progress bar shows the time left).")
    devices = ["auto", "cpu", "cuda"] + (["mps"] if "mps" in runs.available_devices() else [])
    auto_is = runs.available_devices()[0]
    c2.selectbox("Device", devices, key=P + "device", persist_state="session",
                 help=f"auto uses a GPU when there is one (on this server: {auto_is}).")
    with st.expander("More settings"):
        a, b = st.columns(2)  # two per row: four did not fit the form's column at 1,000 px
        c, d = st.columns(2)
        a.number_input("Batch size", 1, 512, key=P + "batch", persist_state="session")
        b.number_input("Sequence length", 2, 1024, key=P + "seq", persist_state="session",
                       help="Short sequences learn fastest on the word problems; use 64+ for text.")
        c.number_input("Learning rate", 1e-5, 1.0, format="%.4f", key=P + "lr",
                       persist_state="session")
        d.number_input("Seed", 0, 2**31 - 1, key=P + "seed", persist_state="session",
                       help="The same seed and settings give the same run.")
        st.checkbox("TensorBoard logs", key=P + "tensorboard", persist_state="session",
                    help="Also write the run's loss, learning rate, gradient norm, tokens/s and validation "
                         "metrics as TensorBoard event files in `tensorboard/` of the server's runs folder "
                         "(`runs/` unless GEOMLAB_RUNS_DIR says otherwise); view them with "
                         "`tensorboard --logdir runs/tensorboard`.")
    st.button("Start training", type="primary", icon=":material/play_arrow:", on_click=start, disabled=active,
              key=P + "start", help="Stop the current run first." if active else "Train in the background.")


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


def unit(snap: live.Snapshot) -> str:
    """What one target is: ``"symbol"`` (a group element of a word problem) or ``"character"`` (text)."""
    data = str(snap.spec.get("data", ""))
    return "symbol" if snap.metric_name == "accuracy" or data.startswith("word-problem:") else "character"


def _run_name(run: live.LiveRun, current: str | None) -> str:
    """Legend name of a run in the overlay: ``this run`` or ``kind[-group] · id``."""
    if run.run_id == current:
        return "this run"
    group = f"-{run.spec.group}" if run.spec.group and live.is_osm(run.spec.kind) else ""
    return f"{run.spec.kind}{group} · {run.run_id[:6]}"


def overlay_choice(run: live.LiveRun) -> list[live.LiveRun]:
    """The runs drawn on the curves chart: this run, then the other runs of this server picked in the
    "Overlay other runs" box (shown only when there are others)."""
    others = [r for r in live.REGISTRY.recent(10) if r.run_id != run.run_id]
    if not others:
        return [run]
    labels = {r.run_id: f"{_run_name(r, None)} · {r.spec.label()} · {r.snapshot().state}" for r in others}
    key = P + "overlay"
    kept = [rid for rid in (st.session_state.get(key) or []) if rid in labels]
    if kept != (st.session_state.get(key) or []):
        st.session_state[key] = kept  # runs forgotten since: dropped before the widget sees them
    picked = st.multiselect("Overlay other runs", list(labels), key=key, format_func=labels.get,
                            placeholder="compare with runs started earlier on this server…",
                            help="Their training and validation losses are drawn on the same chart, one "
                                 "colour per run.")
    return [run] + [r for r in others if r.run_id in picked]


def curves(run: live.LiveRun, snap: live.Snapshot) -> None:
    """Training curves of this run and the runs picked in the overlay box, then the word problem's
    validation accuracy."""
    from geomlab.figures import FigureError
    from geomlab.figures.curves import run_overlay

    chosen = overlay_choice(run)
    snaps = {r.run_id: (snap if r.run_id == run.run_id else r.snapshot()) for r in chosen}
    units = {unit(s) for s in snaps.values()}
    one_unit = units.pop() if len(units) == 1 else "target"
    metric = "bpc" if all(s.metric_name == "bpc" for s in snaps.values()) else "loss"
    hists = {_run_name(r, run.run_id): snaps[r.run_id].history for r in chosen}
    if not any("loss" in h for h in snap.history):
        st.caption("The curves appear after the first logged steps.")
        return
    try:
        fig, caption = run_overlay(hists, metric=metric, unit=one_unit)
    except (FigureError, ValueError) as exc:
        st.caption(str(exc))
        return
    fig.update_layout(height=340 + 20 * max(0, len(chosen) - 1), uirevision="live")
    ui.chart(fig, key="train-curves", filename="geomlab-training-curves")
    st.caption(caption)
    acc = [(h["step"], h["valid_accuracy"]) for h in snap.history if "valid_accuracy" in h]
    if acc:
        f2 = go.Figure(go.Scatter(x=[a for a, _ in acc], y=[b for _, b in acc], mode="lines+markers",
                                  line={"color": "#009E73"}, name="valid accuracy",
                                  hovertemplate="step %{x}: accuracy %{y:.3f}<extra></extra>"))
        f2.update_layout(title={"text": "Validation accuracy", "x": 0.01, "xanchor": "left"}, height=260,
                         template="plotly_white", margin={"l": 70, "r": 20, "t": 50, "b": 40}, uirevision="live")
        # whole steps from 0 to the planned total (one validation point must not read 39…41)
        total = max(1, snap.total)
        f2.update_xaxes(title_text="optimiser step", range=[0, total], tickformat=",d", tickmode="linear",
                        tick0=0, dtick=_nice_dtick(total))  # ≤ 9 whole-step ticks, none repeated
        # a short title: a longer one ("accuracy (all positions)") is cut in the 260 px tall chart
        f2.update_yaxes(title_text="accuracy", range=[0, 1.02], automargin=True)
        ui.chart(f2, key="train-acc", filename="geomlab-accuracy")


def _nice_dtick(total: int) -> int:
    """A whole tick step 1, 2 or 5 × 10^k giving at most 8 intervals on ``0..total`` (375, 750, 1,125...
    were rotated and hard to read)."""
    raw = max(1, -(-int(total) // 8))
    k = 1
    while True:
        for m in (1, 2, 5):
            if m * k >= raw:
                return m * k
        k *= 10


def geometry(run: live.LiveRun, snap: live.Snapshot) -> None:
    """"Geometry now": the current weights traced on the run's probe sequence (geomlab.live.runner.LiveRun.probe),
    the kind's figure and how its probe quantity changed over training."""
    import copy

    probe = run.probe()
    if probe is None:
        st.caption("The first picture appears at the next logged step (a few seconds).")
        return
    if probe.view is None:
        st.info(probe.message or "No geometry view for this run.", icon=":material/info:")
        return
    T = probe.trace.n_positions if probe.trace is not None else 0
    what = ("the group word problem's probe sequence" if unit(snap) == "symbol"
            else "the start of the validation text")
    st.markdown(f"**Weights at step {probe.step:,}** of {snap.total:,}"
                + (" · refreshed every few seconds while the run trains" if snap.active else ""))
    st.caption(f"A copy of the weights traced on {what} ({T} positions) in {probe.trace_ms:.0f} ms; the run "
               "itself is not changed by it.")
    fig = copy.deepcopy(probe.view.figure)  # the probe's figure is shared by every viewer: never changed
    fig.update_layout(uirevision="probe")
    ui.chart(fig, key="train-geometry", filename=f"geomlab-{probe.figure}-step{probe.step}")
    st.caption(probe.view.caption)
    if probe.history:
        from geomlab.figures import FigureError
        from geomlab.figures.curves import probe_history

        try:
            hfig, hcap = probe_history(probe.history)
        except FigureError as exc:
            st.caption(str(exc))
            return
        hfig.update_layout(uirevision="probe-history")
        ui.chart(hfig, key="train-geometry-history", filename="geomlab-probe-history")
        st.caption(hcap)


def figures_panel() -> None:
    """The full-width part under the form: curves (several runs overlaid) and "Geometry now" (a fragment,
    polling while the run trains)."""
    run = live.REGISTRY.get(st.session_state.get(K_RUN))
    if run is None:
        return
    snap = run.snapshot()
    st.subheader("Curves", anchor=False)
    curves(run, snap)
    st.subheader("Geometry now", anchor=False)
    geometry(run, snap)


def panel() -> None:
    """The live part of the page (a fragment; polling while a run is active)."""
    if K_MSG in st.session_state:
        # a button of this fragment (Save, Resume) left a message: only a full rerun shows it above the form
        # and mirrors a newly selected checkpoint into the URL (a fragment rerun skips app.py's URL sync)
        st.rerun(scope="app")
    run = live.REGISTRY.get(st.session_state.get(K_RUN))
    if run is None:
        st.info("No run yet. Choose a model and data in the form and press **Start training**. Training runs "
                "in the background on this server: you can switch pages and come back.",
                icon=":material/model_training:")
        return
    snap = run.snapshot()
    st.markdown(f"**{run.spec.label()}** · {snap.params:,} parameters · state: **{snap.state}**"
                + (f" · on {snap.device}" if snap.device else ""))
    st.progress(snap.fraction, text=f"step {snap.step:,} / {snap.total:,}")
    # two tiles a row: three were cut to "1.…" in the half-width column at 1,000 px; the step is in the bar
    label = {"bpc": "valid BPC", "accuracy": "valid accuracy"}.get(snap.metric_name, f"valid {snap.metric_name}")
    tiles = [("train loss", f"{snap.loss:.3f}" if snap.loss is not None else "–", f"nats per {unit(snap)}")]
    if snap.train_bpc is not None:
        tiles.append(("train BPC", f"{snap.train_bpc:.3f}", "bits per character"))
    tiles += [(label, f"{snap.metric:.3f}" if snap.metric is not None else "–", None),
              ("tokens/s", f"{snap.tokens_per_s:,.0f}" if snap.tokens_per_s else "–", None),
              ("ETA" if snap.active else "time",
               ui.fmt_seconds(snap.eta_s) if snap.active else ui.fmt_seconds(snap.elapsed_s),
               "time left (estimate)" if snap.active else "training time so far")]
    for i in range(0, len(tiles), 2):
        row = st.columns(2)
        for col, (name, value, hlp) in zip(row, tiles[i:i + 2]):
            col.metric(name, value, help=hlp)
    if snap.note:
        st.caption(snap.note)
    if snap.state == "paused":
        st.warning(snap.message, icon=":material/pause_circle:")
    elif snap.state == "error":
        st.error(snap.message, icon=":material/error:")
    elif snap.state == "finished":
        st.success(snap.message, icon=":material/check_circle:")
    elif snap.message:
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
    default_name = f"{run.spec.kind}{'-' + run.spec.group if run.spec.group else ''}-{run.run_id[:6]}"
    s = st.columns([3, 2], vertical_alignment="bottom")  # [3, 1] cut the Save button to its icon at 1,000 px
    s[0].text_input("Save as", value=default_name, key=save_key(run.run_id), placeholder="checkpoint name",
                    help="Saves the current weights as the folder runs/NAME/ (config.json, model.safetensors, a "
                         "README.md model card and geomlab.json), so every page can use them; other characters than letters, digits, '-', '_' and '.' become '-'.")
    s[1].button("Save", icon=":material/save:", on_click=_save, args=(run.run_id,),
                disabled=snap.state == "created" or not mine,
                key="train-save", width="stretch")  # no tooltip: it covered the help icon of "Save as"
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
    # run trains (a finished run read "running" until the next page run); the attached run's panel shows them
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
    left, right = st.columns([1, 1], gap="large")  # [2, 3] cut the form's selects at 1,000 px
    with left:
        with st.container(border=True):
            form(active)
    with right:
        recent_runs()
        st.session_state[K_POLLING] = active
        st.fragment(panel, run_every=POLL_S if active else WATCH_POLL_S if waiting else None)()
    st.fragment(figures_panel, run_every=FIGURES_POLL_S if active else None)()


with ui.guard("The Train live page"):
    main()
