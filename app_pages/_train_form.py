"""The Train live page's form: its widgets (keys ``w_train_*``), their starting values (the app preset), the
run spec they describe (:func:`spec_from_widgets`), the Start button's callback (:func:`start`) and the
widget values of a shown run (:func:`spec_settings`, "Use the shown run's settings")."""

from __future__ import annotations

import streamlit as st

from geomlab.live import runner as live
from geomlab.training import runs
from geomlab.data.vocab import decode_text
from app_pages._messages import md_escape
from app_pages._state import owner_token

K_RUN = "gl_live_run"          # this session's current run id (owned state)
K_MSG = "_gl_train_msg"        # (level, text) shown once above the form
GROUPS = ("O", "SO", "U", "SU", "T", "O-block")
GROUP_HELP = ("O: orthogonal, SO: rotations, U: unitary (complex), SU: special unitary, T: torus (commuting "
              "phases), O-block: block-diagonal orthogonal.")
DATA_KINDS = ("Synthetic task", "Registered corpus", "Your text")
P = "w_train_"  # widget key prefix (widgets keep their values for the session)
# Newcomer defaults (the app preset, geomlab.training.runs.PRESETS): osm-rnn, group O, 20k, word problem in Z5,
# 200 steps, sequence length 8, lr 0.005. Measured on the 2-core dev box (1 thread, seeds 0 and 1): valid accuracy
# 0.86 and 0.97 after 200 steps (chance 0.20; lr 0.01: 0.80 and 0.89), 1.00 and 1.00 after 3,000 steps (lr 0.01
# fell back to 0.35 and 0.36: its loss rose again after step ~150); S3 at length 32 and lr 0.003 stays at chance.
APP = runs.RunSpec.preset("app")
DEFAULT_TASK = APP.data.split(":")[1]
#: The form's starting values (set in the session state before its widgets are drawn): the app preset's values
FORM_DEFAULTS = {P + "params": APP.params, P + "task": DEFAULT_TASK, P + "steps": APP.steps,
                 P + "batch": APP.batch_size, P + "seq": APP.seq_len, P + "lr": APP.lr, P + "seed": APP.seed}


#: The sequence length the form switches to for a text (a corpus or the user's), from the word problems' 8 (design
#: choice: 8 characters of context learn little of a text; the field's help says 64+), and back.
TEXT_SEQ = 64


def source_changed() -> None:
    """The Data choice's callback: a sequence length still at the word problems' default becomes
    :data:`TEXT_SEQ` for a text, and the other way round; a length the user typed is kept."""
    ss = st.session_state
    text = ss.get(P + "source") != DATA_KINDS[0]
    if text and ss.get(P + "seq") == APP.seq_len:
        ss[P + "seq"] = TEXT_SEQ
    elif not text and ss.get(P + "seq") == TEXT_SEQ:
        ss[P + "seq"] = APP.seq_len


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
    text = text_name = None
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
            text_name = up.name
        else:
            text = ss.get(P + "text") or ""
        if not text.strip():
            raise ValueError("Your text is empty: paste some text or upload a .txt file (at least 100 characters).")
    return live.RunSpec.preset(
        "app", kind=kind, group=ss.get(P + "group") if live.is_osm(kind) else None, params=int(ss[P + "params"]),
        data=data, text=text, text_name=text_name, steps=int(ss[P + "steps"]), device=ss[P + "device"],
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
    :data:`geomlab.live.runner.SYNTHETIC_TASKS` is the caption under it: the long one does not fit the select at a 1,000 px window)."""
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
    # one select per row: two per row would cut the options ("osm-rn") in the form's column at a 1,000 px window
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
    st.radio("Data", DATA_KINDS, key=P + "source", horizontal=True, persist_state="session", on_change=source_changed,
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
        a, b = st.columns(2)  # two per row: four do not fit the form's column at 1,000 px
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
