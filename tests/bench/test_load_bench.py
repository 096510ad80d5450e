"""The load benchmark (``geomlab bench load``): its protocol messages built and parsed offline,
its helpers, and one smoke run against the real server (3 sessions, 1 cursor move; no timing asserts)."""

from __future__ import annotations

import json

import pytest

from geomlab.bench import available
from geomlab.bench import load as bench
from geomlab.bench.load import protocol as bench_protocol


def _element(kind: str, **fields):
    """An ``Element`` proto with its ``kind`` field set from ``fields``."""
    from streamlit.proto.Element_pb2 import Element

    el = Element()
    sub = getattr(el, kind)
    for k, v in fields.items():
        target = getattr(sub, k)
        if isinstance(v, list):
            target[:] = v
        elif hasattr(target, "CopyFrom") and not isinstance(v, (str, int, float)):
            target.CopyFrom(v)
        else:
            setattr(sub, k, v)
    return el


def _select_slider(label: str, options: list[str], wid: str = "$$ID-abc-w_pos"):
    from streamlit.proto.Slider_pb2 import Slider

    return _element("slider", id=wid, label=label, type=Slider.Type.SELECT_SLIDER, options=options,
                    min=0, max=len(options) - 1, step=1, default=[0])


def test_listed_among_benchmarks():
    assert "load" in available()


def test_finds_the_token_cursor_among_other_widgets():
    from streamlit.proto.Slider_pb2 import Slider

    layer = _element("slider", id="$$ID-l-w_gl_layer", label="Layer", type=Slider.Type.SLIDER, min=0, max=3)
    cursor = _select_slider("Token cursor", ["0 · T", "1 · o", "2 · ␣"])
    text = _element("markdown", body="`bundled/x` · 3 tokens · cursor at 0")
    w = bench.find_cursor([text, layer, cursor, text])
    assert w == bench.CursorWidget("$$ID-abc-w_pos", "select_slider", ["0 · T", "1 · o", "2 · ␣"], 0, 2)
    assert w.n_positions == 3
    assert bench.find_cursor([layer, text]) is None


def test_cursor_state_matches_what_the_frontend_sends():
    from streamlit.proto.Slider_pb2 import Slider

    w = bench.find_cursor([_select_slider("Token cursor", ["0 · a", "1 · b", "2 · c"])])
    st = bench.cursor_state(w, 1)
    assert st.id == w.id and st.WhichOneof("value") == "string_array_value"
    assert list(st.string_array_value.data) == ["1 · b"]
    assert list(bench.cursor_state(w, 99).string_array_value.data) == ["2 · c"]  # clamped
    plain = bench.find_cursor([_element("slider", id="s", label="Token cursor", type=Slider.Type.SLIDER,
                                        min=0, max=9)])
    assert plain.kind == "slider" and plain.n_positions == 10
    st = bench.cursor_state(plain, 4)
    assert st.WhichOneof("value") == "double_array_value" and list(st.double_array_value.data) == [4.0]


def test_rerun_backmsg_round_trips():
    from streamlit.proto.BackMsg_pb2 import BackMsg

    w = bench.find_cursor([_select_slider("Token cursor", ["0 · a", "1 · b"])])
    data = bench.rerun_backmsg(query_string="ckpt=bundled%2Fx&text=hi", page_name="attention",
                               page_script_hash="h1", widget_states=[bench.cursor_state(w, 1)])
    msg = BackMsg()
    msg.ParseFromString(data)
    assert msg.WhichOneof("type") == "rerun_script"
    cs = msg.rerun_script
    assert (cs.query_string, cs.page_name, cs.page_script_hash) == ("ckpt=bundled%2Fx&text=hi", "attention", "h1")
    assert [s.id for s in cs.widget_states.widgets] == [w.id]


def _fwd(**kw):
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    msg = ForwardMsg()
    for k, v in kw.items():
        if k == "script_finished":
            msg.script_finished = v
        elif k == "element":
            msg.delta.new_element.CopyFrom(v)
        elif k == "new_session_hash":
            msg.new_session.page_script_hash = v
        elif k == "query_string":
            msg.page_info_changed.query_string = v
    return msg.SerializeToString()


def test_the_live_chart_name_is_the_apps():
    from app_pages import _live_chart

    assert bench_protocol.LIVE_CHART == _live_chart._NAME


def test_run_reader_folds_a_recorded_run():
    from streamlit.proto.Alert_pb2 import Alert
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    r = bench.RunReader()
    frames = [
        _fwd(new_session_hash="page-1"),
        _fwd(element=_element("plotly_chart", spec="{}")),
        _fwd(script_finished=ForwardMsg.ScriptFinishedStatus.FINISHED_EARLY_FOR_RERUN),
        _fwd(new_session_hash="page-1"),
        _fwd(element=_select_slider("Token cursor", ["0 · a", "1 · b"])),
        _fwd(element=_element("plotly_chart", spec="{}")),
        _fwd(element=_element("bidi_component", component_name=bench_protocol.LIVE_CHART)),
        _fwd(element=_element("bidi_component", component_name="some_other_component")),  # not a chart
        _fwd(element=_element("alert", body="The text has no tokens.", format=Alert.Format.ERROR)),
        _fwd(element=_element("alert", body="2 characters not in the vocabulary", format=Alert.Format.WARNING)),
        _fwd(element=_element("exception", type="KeyError", message="'x'")),
        _fwd(query_string="ckpt=a&pos=0"),
        _fwd(script_finished=ForwardMsg.ScriptFinishedStatus.FINISHED_SUCCESSFULLY),
    ]
    runs = [run for run in map(r.feed, frames) if run is not None]
    assert [run.status for run in runs] == [2, 0]
    last = runs[-1]
    assert last.finished_ok and last.charts == 2
    assert last.errors == ["The text has no tokens.", "KeyError: 'x'"]  # warnings are not errors
    assert bench.find_cursor(last.elements).options == ["0 · a", "1 · b"]
    assert (r.page_script_hash, r.query_string) == ("page-1", "ckpt=a&pos=0")
    assert r.total_bytes == sum(len(f) for f in frames)


class _FakeSocket:
    """Answers the client like a server whose view fills its chart in from a ``run_every`` fragment."""

    def __init__(self, frames):
        import asyncio

        self.queue = asyncio.Queue()
        for f in frames:
            self.queue.put_nowait(f)
        self.sent = []

    async def send(self, data):
        from streamlit.proto.BackMsg_pb2 import BackMsg
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        msg = BackMsg()
        msg.ParseFromString(data)
        self.sent.append(msg)
        cs = msg.rerun_script
        if cs.fragment_id == "frag-1" and cs.is_auto_rerun:
            for f in (_fwd(new_session_hash="page-1"), _fwd(element=_element("plotly_chart", spec="{}")),
                      _fwd(script_finished=ForwardMsg.ScriptFinishedStatus.FINISHED_FRAGMENT_RUN_SUCCESSFULLY)):
                self.queue.put_nowait(f)

    async def recv(self):
        return await self.queue.get()


def test_read_view_serves_fragment_timers_until_the_chart_is_there():
    import asyncio
    import time

    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    auto = ForwardMsg()
    auto.auto_rerun.interval = 0.05
    auto.auto_rerun.fragment_id = "frag-1"
    ws = _FakeSocket([_fwd(new_session_hash="page-1"), auto.SerializeToString(),
                      _fwd(element=_element("markdown", body="Tracing…")),
                      _fwd(script_finished=ForwardMsg.ScriptFinishedStatus.FINISHED_SUCCESSFULLY)])
    reader = bench.RunReader()
    run = asyncio.run(bench.read_view(ws, reader, time.monotonic() + 5, page="attention"))
    assert run.charts == 1 and run.finished_ok and len(run.elements) == 2
    (req,) = [m.rerun_script for m in ws.sent]
    assert (req.fragment_id, req.is_auto_rerun, req.page_script_hash) == ("frag-1", True, "page-1")


def test_cursor_inside_a_fragment_carries_its_fragment_id():
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    msg = ForwardMsg()
    msg.delta.new_element.CopyFrom(_select_slider("Token cursor", ["0 · a", "1 · b"], wid="w"))
    msg.delta.fragment_id = "frag-9"
    r = bench.RunReader()
    r.feed(_fwd(new_session_hash="p"))
    r.feed(msg.SerializeToString())
    run = r.feed(_fwd(script_finished=ForwardMsg.ScriptFinishedStatus.FINISHED_SUCCESSFULLY))
    assert bench.find_cursor(run.elements, fragments=run.fragments).fragment_id == "frag-9"


def test_move_targets_spread_and_change():
    assert bench.move_targets(512, 3) == [170, 341, 511]
    assert bench.move_targets(2, 3) == [1, 0, 1]
    assert bench.move_targets(1, 3) == [] and bench.move_targets(10, 0) == []
    for n in range(2, 12):
        prev = 0
        for t in bench.move_targets(n, 4):
            assert 0 <= t < n and t != prev
            prev = t


def test_session_texts_are_distinct_and_sized():
    texts = bench.session_texts(40, 512, source=bench.BUILTIN_TEXT)
    assert len(texts) == 40 and len(set(texts)) == 40 and {len(t) for t in texts} == {512}
    assert len(set(bench.session_texts(5, 8, source="abcdefgh"))) == 5
    with pytest.raises(ValueError):
        bench.session_texts(3, 0)


def test_checkpoints_for_views_prefers_the_view_family(tmp_path):
    cards = {"cem-a": ("cem", "char"), "osm-rnn-s5": ("osm-rnn", "symbol"), "osm-rnn-t": ("osm-rnn", "char"),
             "osmformer-u": ("osmformer", "char"), "grassmann-x": ("grassmann", "char"),
             "half": ("osmformer", "char")}
    for name, (kind, level) in cards.items():
        card = {"model_config": {"kind": kind}, "vocab": {"level": level}}
        (tmp_path / f"{name}.json").write_text(json.dumps(card))
        if name != "half":  # a checkpoint without its weights is not offered
            (tmp_path / f"{name}.safetensors").write_bytes(b"")
    found = bench.bundled_checkpoints(tmp_path)
    got = bench.checkpoints_for(bench.DEFAULT_VIEWS, found)
    assert got == {"trajectories": ["osm-rnn-t", "osmformer-u"], "tangents": ["osmformer-u", "osm-rnn-t"],
                   "attention": ["osmformer-u", "cem-a"], "energy": ["cem-a"], "planes": ["grassmann-x"]}


def test_bundled_checkpoints_reads_hugging_face_folders(tmp_path):
    for name, kind, vocab in (("a", "cem", {"level": "symbol"}), ("b", "lstm", None), ("c", "osmformer", {})):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps({"kind": kind}))
        if vocab is not None:
            (folder / "vocab.json").write_text(json.dumps(vocab))
        if name != "c":  # no weights: not offered
            (folder / "model.safetensors").write_bytes(b"")
    assert bench.bundled_checkpoints(tmp_path) == [("a", "cem", "symbol"), ("b", "lstm", "char")]


def test_log_errors_and_percentile():
    log = "\n".join([
        "  You can now view your Streamlit app in your browser.",
        "2026-12-01 04:00:00.000 ERROR streamlit.runtime: Error processing back message",
        "Tracing the text failed",
        "Traceback (most recent call last):",
        '  File "x.py", line 1, in <module>',
        "    raise ValueError('bad')",
        "ValueError: bad",
        "INFO fine",
    ])
    assert bench.log_errors(log) == [
        "2026-12-01 04:00:00.000 ERROR streamlit.runtime: Error processing back message",
        "Tracing the text failed | Traceback (most recent call last): | ValueError: bad"]
    assert bench.percentile([], 50) is None
    assert bench.percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert bench.percentile([1.0, 2.0, 3.0, 4.0], 95) == pytest.approx(3.85)


def test_lockstep_releases_a_round_when_everyone_arrived_or_left():
    import asyncio
    import time

    async def go():
        lock = bench.Lockstep(3)
        order = []

        async def session(name, rounds, delay):
            try:
                for k in range(rounds):
                    await asyncio.sleep(delay)
                    await lock.wait(k, time.monotonic() + 5)
                    order.append((k, name))
            finally:
                await lock.leave()

        await asyncio.gather(session("a", 2, 0.0), session("b", 2, 0.05), session("c", 0, 0.0))
        return order

    order = asyncio.run(go())
    assert sorted(order) == [(0, "a"), (0, "b"), (1, "a"), (1, "b")]
    assert {k for k, _ in order[:2]} == {0}  # nobody starts round 1 before both finished round 0


def test_rejects_bad_arguments():
    with pytest.raises(ValueError):
        bench.run_load(1, views=["nope"])
    with pytest.raises(ValueError):
        bench.run_load(0)


@pytest.mark.slow
def test_smoke_three_sessions_one_move(capsys):
    result = bench.run_load(3, moves=1, chars=64, timeout=480)
    print(bench.report(result))
    assert result.page_errors == [] and result.log_errors == []
    assert len(result.first_views) == 3 and len(result.move_times) == 3
    assert all(s.first_charts >= 1 for s in result.sessions)
    assert result.peak_rss_mb > 0
