"""The Streamlit app through ``streamlit.testing.v1.AppTest``: every page, shared state and URL, bad inputs,
uploads, and a tiny live training run started and stopped from the Train page.

Checkpoints are made here through the real Trainer (a couple of steps each) into a temporary runs folder;
``GEOMLAB_BUNDLED_DIR`` points at an empty folder so the app's "no bundled checkpoint" path is exercised.
"""

from __future__ import annotations

import base64
import json
import io
import os
import re
import shutil
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
from conftest import run_page
from streamlit.testing.v1 import AppTest

from app_pages import _state
from app_pages._messages import md_escape
from geomlab.checkpoints import catalog
from geomlab.checkpoints.io import read_meta
from geomlab.live import runner as live
from helpers.charts import charts
from helpers.checkpoints import change_one_value

APP = str(Path(__file__).resolve().parents[2] / "app.py")
TIMEOUT = 120
TEXT = ("ROMEO: But soft, what light through yonder window breaks? It is the east, and Juliet is the sun. "
        "Arise, fair sun, and kill the envious moon.\n") * 3

# name -> RunSpec overrides; each trains 2 steps through geomlab.training.trainer.Trainer
SPECS = {
    "osm": dict(kind="osm-rnn", group="O", params=2_000, data="text", text=TEXT),
    "osmformer": dict(kind="osmformer", group="SO", params=2_000, data="text", text=TEXT,
                      model_overrides={"d": 3, "n_layers": 2}),
    "cem": dict(kind="cem", params=5_000, data="text", text=TEXT),
    "grassmann": dict(kind="grassmann", params=5_000, data="text", text=TEXT),
    "s3": dict(kind="lstm", params=2_000, data="word-problem:S3"),
}
VIEW_CKPT = {"trajectories": "osm", "tangents": "osm", "attention": "osmformer", "energy": "cem",
             "planes": "grassmann"}


@pytest.fixture(scope="session")
def _trained_dirs(tmp_path_factory):
    """A runs folder with one tiny trained checkpoint per family, an empty bundled folder (trained once)."""
    root = tmp_path_factory.mktemp("app")
    runs, bundled = root / "runs", root / "bundled"
    bundled.mkdir()
    with pytest.MonkeyPatch.context() as mp:  # named only while training: set for the whole session, they
        mp.setenv("GEOMLAB_RUNS_DIR", str(runs))  # hid the shipped checkpoints from later modules' tests
        mp.setenv("GEOMLAB_BUNDLED_DIR", str(bundled))
        for name, kw in SPECS.items():
            run = live.LiveRun(live.RunSpec(steps=2, batch_size=2, seq_len=16, threads=1, **kw),
                               work_dir=root / "work" / name).start()
            snap = live.wait_for(run, lambda s: not s.active, timeout=TIMEOUT)
            assert snap.state == "finished", (name, snap.message)
            run.save(name)
    return runs, bundled


@pytest.fixture
def ckpt_dirs(_trained_dirs, monkeypatch):
    """The trained runs folder and the empty bundled folder, named by the environment for this test only."""
    runs, bundled = _trained_dirs
    monkeypatch.setenv("GEOMLAB_RUNS_DIR", str(runs))
    monkeypatch.setenv("GEOMLAB_BUNDLED_DIR", str(bundled))
    return runs, bundled


def ref(name: str) -> str:
    return f"runs/{name}"


def app(**state) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    for k, v in state.items():
        at.session_state[k] = v
    return at


def goto(at: AppTest, slug: str) -> AppTest:
    at.switch_page(f"app_pages/{slug}.py")
    return at.run()


def owner(at: AppTest) -> str | None:
    """The session's owner token (what it created is its own)."""
    return at.session_state["_gl_owner"] if "_gl_owner" in at.session_state else None


def shown(markdown: str) -> str:
    """The text a message shows: its markdown source without the backslash escapes of user values."""
    import re

    return re.sub(r"\\(.)", r"\1", markdown)


def errors(at: AppTest) -> list[str]:
    return [e.value for e in at.error]


def decode(values) -> list[float]:
    """A Plotly JSON array: a list, or the typed-array form ``{"dtype", "bdata"}`` plotly 6+ writes."""
    if isinstance(values, dict) and "bdata" in values:
        return np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"]).tolist()
    return list(values or [])


def test_home_without_any_checkpoint_says_so_and_links_to_train(tmp_path, monkeypatch):
    monkeypatch.setenv("GEOMLAB_RUNS_DIR", str(tmp_path / "none1"))
    monkeypatch.setenv("GEOMLAB_BUNDLED_DIR", str(tmp_path / "none2"))
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert not at.exception
    assert any("No checkpoint is available" in i.value for i in at.info)
    assert len(charts(at)) == 3  # one picture per family, drawn without any checkpoint
    links = [p.proto.page for p in at.get("page_link")]
    assert any(l.endswith("train.py") or "train" in l for l in links)
    for slug in ("trajectories", "compare", "checkpoints", "train"):
        goto(at, slug)
        assert not at.exception, slug
        assert not errors(at), slug


def test_home_links_open_views_with_a_fitting_checkpoint(ckpt_dirs):
    at = app()
    assert not at.exception
    links = {p.proto.label: p.proto for p in at.get("page_link")}
    assert "Group trajectories" in links and "CEM energy" in links
    assert "ckpt=runs%2Fosm" in links["Group trajectories"].query_string or \
        "ckpt=runs/osm" in links["Group trajectories"].query_string
    assert "runs%2Fcem" in links["CEM energy"].query_string or "runs/cem" in links["CEM energy"].query_string


def test_home_osm_picture_joins_eigenvalues_along_the_circle():
    """The OSM card's eigenvalues stay on the unit circle as they turn: every drawn line follows the circle
    (straight chords between the steps, up to 0.83 rad apart, cut inside it as if the state left the group)."""
    from app_pages.home import osm_picture

    fig = osm_picture()
    lines = [t for t in fig.data if "lines" in (t.mode or "")]
    assert len(lines) == 7 and any(t.mode == "markers" for t in fig.data)  # the circle and six paths
    for t in lines:
        z = np.asarray(decode(t.x)) + 1j * np.asarray(decode(t.y))
        assert np.allclose(abs(z), 1.0)
        assert np.abs(np.angle(z[1:] / z[:-1])).max() < 0.05  # a chord that short stays on the circle


def test_home_osm_card_links_attention_to_an_osmformer_and_compare_to_a_shared_view(tmp_path, monkeypatch,
                                                                                 ckpt_dirs):
    runs, _ = ckpt_dirs
    two = tmp_path / "two-osmformers"
    two.mkdir()
    for src, dst in (("cem", "a-cem"), ("osmformer", "osmformer-1"), ("osmformer", "osmformer-2")):
        shutil.copytree(runs / src, two / dst)  # checkpoint folders
    for f in (two / "a-cem").iterdir():  # the CEM is the newest, so "any attention kind" would pick it
        os.utime(f, (time.time() + 60, time.time() + 60))
    monkeypatch.setenv("GEOMLAB_RUNS_DIR", str(two))
    at = app()
    attention = [p.proto for p in at.get("page_link") if p.proto.label == "Attention similarity"]
    assert len(attention) == 2  # the OSM card's and the CEM card's
    assert "osmformer" in attention[0].query_string and "cem" in attention[1].query_string
    cmp_link = next(p.proto for p in at.get("page_link") if p.proto.label == "Compare two models")
    assert "osmformer-1" in cmp_link.query_string and "osmformer-2" in cmp_link.query_string
    at2 = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at2.query_params.update({"ckpt": "runs/osmformer-1", "b": "runs/osmformer-2"})
    at2.switch_page("app_pages/compare.py")
    at2.run()
    assert not at2.exception and not errors(at2)
    assert at2.session_state["gl_compare_view"] == "trajectories"  # a view both sides can show
    assert not any("does not apply" in i.value for i in at2.info)


@pytest.mark.parametrize("slug", list(VIEW_CKPT))
def test_every_view_page_draws_figures_without_exception(ckpt_dirs, slug):
    at = app(gl_ckpt=ref(VIEW_CKPT[slug]))
    goto(at, slug)
    assert not at.exception, [e.value for e in at.exception]
    assert not errors(at), errors(at)
    assert len(charts(at)) >= 1
    assert len(at.caption) >= 1 + len(charts(at)) - 1  # every figure has its caption
    assert any(b.label.startswith("Trace (.npz)") for b in at.get("download_button"))


def _registry_trace(name: str):
    """The trace a page shows for checkpoint ``runs/name`` with its default text."""
    from geomlab.checkpoints import io as checkpoint
    from geomlab.trace import trace_text
    from app_pages._data import default_text_for

    entry = next(e for e in catalog.list_checkpoints() if e.ref == ref(name))
    ck = checkpoint.load(entry.path, device="cpu")
    return trace_text(ck.model, ck.vocab, default_text_for(entry))


@pytest.mark.parametrize("slug", list(VIEW_CKPT))
def test_every_view_page_draws_its_registry_figures_in_order(ckpt_dirs, slug):
    """The page draws exactly the registry's figures that apply to the trace, in the registry's order, and
    offers the controls the registry lists for it."""
    from geomlab.teach import views

    at = app(gl_ckpt=ref(VIEW_CKPT[slug]))
    goto(at, slug)
    tr = _registry_trace(VIEW_CKPT[slug])
    order = [f.name for f in views.default_figures(slug, tr)]  # the rest waits under "More figures"
    names = [c.key.split(f"{slug}-", 1)[1] for c in charts(at)]  # chart keys are "<slug>-<figure>"
    failed = [i.value.split(":")[0].replace(" ", "_") for i in at.info]  # a figure that cannot be drawn
    assert sorted(names + [f for f in failed if f in order]) == sorted(order), (names, failed)
    assert names == [n for n in order if n in names]
    opts = views.control_options(slug, tr)
    labels = {w.label for w in (*at.slider, *at.selectbox, *at.radio)}
    if "layer" in opts:
        assert "Layer" in labels
    if "head" in opts:
        assert "Head" in labels
    if "slot" in opts:
        assert "Offset slot" in labels
    if "block" in opts:
        assert "Sub-block" in labels
    used = {a for f in views.default_figures(slug, tr) for a in f.controls}
    if "substep" in opts:  # only while a figure on screen takes it (the generator heatmap is under "more")
        assert ("Update" in labels) == ("substep" in used)


def test_debug_caption_shows_the_cache(ckpt_dirs):
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"ckpt": ref("cem"), "debug": "1"})
    at.switch_page("app_pages/energy.py")
    at.run()
    assert not at.exception
    line = next(c.value for c in at.caption if c.value.startswith("cache: "))
    assert "hit rate" in line and " MB" in line
    assert at.query_params["debug"] == ["1"] or at.query_params["debug"] == "1"  # kept in the URL
    plain = app(gl_ckpt=ref("cem"))
    goto(plain, "energy")
    assert not any(c.value.startswith("cache: ") for c in plain.caption)


def test_the_warm_up_builds_the_first_view_into_the_shared_cache(ckpt_dirs):
    """What the warm-up thread builds is exactly what a first visit reads: no trace or figure misses."""
    from app_pages import _data, _warm

    entry = next(e for e in catalog.list_checkpoints() if e.ref == ref("cem"))
    _data.cache().clear()
    assert _warm.prewarm_view("energy", entry) >= 1
    before = _data.cache().stats()
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"ckpt": ref("cem")})
    at.switch_page("app_pages/energy.py")
    at.run()
    assert not at.exception and len(charts(at)) >= 1
    after = _data.cache().stats()
    assert after.misses == before.misses, (before, after)
    assert after.hits > before.hits
    targets = _warm.warm_targets(catalog.list_checkpoints())
    assert targets and len({(s, e.ref) for s, e in targets}) == len(targets)


@pytest.mark.parametrize("slug", ["train", "compare", "checkpoints"])
def test_work_pages_run_without_exception(ckpt_dirs, slug):
    at = app(gl_ckpt=ref("osm"), gl_ckpt_b=ref("osmformer"))
    goto(at, slug)
    assert not at.exception, [e.value for e in at.exception]
    assert not errors(at), errors(at)


def test_compare_shows_both_checkpoints_side_by_side(ckpt_dirs):
    at = app(gl_ckpt=ref("osm"), gl_ckpt_b=ref("osmformer"))
    goto(at, "compare")
    assert len(charts(at)) >= 3  # surprisal + at least one figure per side
    spec = json.loads(charts(at)[0].spec)
    assert {d["name"].split(" (")[0] for d in spec["data"]} == {"A: osm", "B: osmformer"}
    table = at.dataframe[0].value  # the two sides' metrics with their training steps
    assert list(table["side"]) == ["A", "B"] and all(str(v) not in ("", "None") for v in table["trained"])
    assert list(at.dataframe[0].proto.column_order)[:5] == ["side", "name", "valid", "test", "trained"]
    # on a phone the side and name (272 px) left the test column cut: there the numbers and their unit come
    # right after the side letter, the name (under each picker) after them
    import app_pages._ui as ui_mod

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ui_mod, "is_phone", lambda: True)
        phone = goto(app(gl_ckpt=ref("osm"), gl_ckpt_b=ref("osmformer")), "compare")
    order = list(phone.dataframe[0].proto.column_order)
    assert order[:4] == ["side", "metric", "valid", "test"] and sorted(order) == sorted(
        at.dataframe[0].proto.column_order)
    # the stacked pickers: a large gap between them left ~70 px empty on a phone
    assert "gap_size: SMALL" in str(phone.columns[0].proto) and "gap_size: LARGE" in str(at.columns[0].proto)
    # no column pinned, on a phone or not: Streamlit draws a pinned column's text faded, a pale grey
    for t in (phone, at):
        assert not any(c.get("pinned") for c in json.loads(t.dataframe[0].proto.columns).values())


def test_a_default_checkpoint_of_the_wrong_kind_is_replaced_with_a_message(ckpt_dirs):
    at = app(gl_ckpt=ref("cem"), _gl_ckpt_explicit=False)  # a fresh session's default, not the user's pick
    goto(at, "planes")
    assert at.session_state["gl_ckpt"] == ref("grassmann") and charts(at)
    # no silent switches, a default included (it was shown as the selection on other pages)
    notes = [shown(c.value) for c in at.caption]
    assert any(v.startswith("Showing **grassmann**") and "the app's default, cem (cem), is on the pages" in v
               for v in notes), notes


def test_a_first_visit_opens_the_checkpoint_the_warm_up_built(zoo):
    """A fresh visit to a view whose kinds the app's default lacks shows the view's own default, the one Home
    links to and the warm-up builds (it showed the default's closest relative, an OSMFormer, while the
    warm-up had built the OSM-RNN: the first view missed the cache)."""
    from app_pages import _data
    from app_pages._warm import warm_targets
    from geomlab.checkpoints import catalog

    found = catalog.list_checkpoints()
    targets = {slug: e.ref for slug, e in warm_targets(found)}
    default = _data.default_ref(found=found)
    moved = 0
    for slug in VIEW_CKPT:
        at = AppTest.from_file(APP, default_timeout=TIMEOUT)
        at.switch_page(f"app_pages/{slug}.py")
        at.run()
        assert not at.exception, slug
        assert at.session_state["gl_ckpt"] == targets[slug], (slug, at.session_state["gl_ckpt"], targets[slug])
        moved += at.session_state["gl_ckpt"] != default
    assert moved  # some view cannot show the app's default: the case this is about


def test_a_linked_checkpoint_of_the_wrong_kind_gives_a_notice(ckpt_dirs):
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["ckpt"] = ref("cem")
    at.switch_page("app_pages/trajectories.py")
    at.run()
    assert any("instead of cem" in i.value for i in at.info), [i.value for i in at.info]
    assert at.session_state["gl_ckpt"] in (ref("osm"), ref("osmformer"))


def test_arriving_with_the_wrong_kind_switches_to_a_fitting_checkpoint(ckpt_dirs):
    at = app(gl_ckpt=ref("cem"), _gl_ckpt_explicit=True)
    goto(at, "trajectories")
    assert any("Showing **osm" in i.value for i in at.info), [i.value for i in at.info]
    assert at.session_state["gl_ckpt"] in (ref("osm"), ref("osmformer"))
    assert charts(at)
    # the picker only offers checkpoints this view can show
    options = at.selectbox(key="w_gl_ckpt").options
    assert options and all("cem" not in o and "grassmann" not in o for o in options)


def test_a_view_with_no_fitting_checkpoint_explains_and_links_to_train(tmp_path, monkeypatch, ckpt_dirs):
    runs, _ = ckpt_dirs
    only = tmp_path / "only-cem"
    only.mkdir()
    shutil.copytree(runs / "cem", only / "cem")
    monkeypatch.setenv("GEOMLAB_RUNS_DIR", str(only))
    at = app(gl_ckpt=ref("cem"))
    goto(at, "planes")
    assert any("Grassmann" in w.value for w in at.warning)
    assert not charts(at) and not at.exception
    assert any("train" in p.proto.page for p in at.get("page_link"))


def test_checkpoint_text_and_cursor_carry_across_pages_and_into_the_url(ckpt_dirs):
    at = app(gl_ckpt=ref("osm"))
    goto(at, "trajectories")
    at.text_area(key="w_text").set_value("But soft, what light").run()
    assert at.session_state["gl_text"] == "But soft, what light"
    at.select_slider(key="w_pos").set_value(5).run()
    assert at.session_state["gl_pos"] == 5
    goto(at, "tangents")
    assert at.session_state["gl_text"] == "But soft, what light"
    assert at.text_area(key="w_text").value == "But soft, what light"
    assert at.select_slider(key="w_pos").value == 5
    assert at.query_params.get("ckpt") == ref("osm")
    assert at.query_params.get("text") == "But soft, what light"
    assert at.query_params.get("pos") == "5"
    at.selectbox(key="w_gl_ckpt").set_value(ref("osmformer")).run()
    assert at.session_state["gl_ckpt"] == ref("osmformer") and at.query_params.get("ckpt") == ref("osmformer")
    assert at.text_area(key="w_text").value == "But soft, what light"  # the text stays
    at.selectbox(key="w_gl_ckpt").set_value(ref("osm")).run()
    links = [t.value for t in at.text_input if "/tangents?" in (t.value or "")]
    assert links and "ckpt=runs%2Fosm" in links[0] and "pos=5" in links[0] and "text=But+soft" in links[0]


def test_cursor_moves_the_highlight_in_the_figures(ckpt_dirs):
    at = app(gl_ckpt=ref("osm"), gl_text="But soft, what light")
    goto(at, "trajectories")
    before = [c.spec for c in charts(at)]
    at.select_slider(key="w_pos").set_value(7).run()
    after = [c.spec for c in charts(at)]
    assert len(before) == len(after) >= 1
    assert sum(a != b for a, b in zip(before, after)) >= 1


def test_a_link_reopens_the_same_view(ckpt_dirs):
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"ckpt": ref("osm"), "text": "light through yonder", "pos": "4"})
    at.run()
    assert at.session_state["gl_ckpt"] == ref("osm")
    assert at.session_state["gl_text"] == "light through yonder"
    assert at.session_state["gl_pos"] == 4
    goto(at, "trajectories")
    assert at.select_slider(key="w_pos").value == 4
    assert not at.exception


def test_a_link_to_a_missing_checkpoint_gives_a_notice(ckpt_dirs):
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"ckpt": "runs/../../etc/passwd", "pos": "x"})
    at.run()
    assert not at.exception
    assert at.session_state["gl_ckpt"] != "runs/../../etc/passwd"
    assert any("not here" in w.value or "not a number" in w.value for w in at.warning)


@pytest.mark.parametrize("text, kind, needle", [
    ("", "error", "empty"),
    ("x" * 3000, "error", "at most 2,048"),
    ("naïve café ≠ ascii", "warning", "not in this checkpoint's vocabulary"),
])
def test_bad_text_gives_a_message_not_a_traceback(ckpt_dirs, text, kind, needle):
    at = app(gl_ckpt=ref("osm"), gl_text=text)
    goto(at, "trajectories")
    assert not at.exception
    messages = [m.value for m in (at.error if kind == "error" else at.warning)]
    assert any(needle in m for m in messages), messages


def test_link_values_are_checked_and_the_url_normalised(ckpt_dirs):
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"ckpt": "../../etc/passwd", "layer": "-3"})
    at.switch_page("app_pages/trajectories.py")
    at.run()
    warnings = [shown(w.value) for w in at.warning]
    assert any("'../../etc/passwd', which is not here" in w and "layer='-3': it must be a layer ≥ 0" in w for w in warnings), warnings
    assert at.query_params.get("ckpt") not in ("../../etc/passwd", ["../../etc/passwd"])
    assert "layer" not in at.query_params or at.query_params["layer"] not in ("-3", ["-3"])
    assert at.session_state["gl_layer"] is None or at.session_state["gl_layer"] >= 0


def test_a_text_over_the_limit_is_not_mirrored_and_unknown_characters_are_all_counted(ckpt_dirs):
    at = app(gl_ckpt=ref("osm"), gl_text="y" * 5000)
    goto(at, "trajectories")
    assert any("at most 2,048" in e.value for e in at.error)
    assert "text" not in at.query_params  # a rejected text is never put into the address bar
    odd = "But ÀÁÂÃÄÅÆÇÈÉÊ"  # 11 characters outside an ASCII vocabulary
    at = app(gl_ckpt=ref("osm"), gl_text=odd)
    goto(at, "trajectories")
    msg = next(w.value for w in at.warning if "vocabulary" in w.value).replace("\\", "")  # as markdown shows it
    assert msg.startswith("11 characters") and "… (1 more)" in msg, msg


def test_an_emptied_text_leaves_no_cursor_in_the_url(ckpt_dirs):
    at = app(gl_ckpt=ref("osm"))
    goto(at, "trajectories")
    at.session_state["gl_pos"] = 5
    at.text_area(key="w_text").set_value("some text").run()
    assert at.query_params.get("pos") in ("5", ["5"])
    at.text_area(key="w_text").set_value("").run()
    assert any("The text is empty" in e.value for e in at.error)
    assert "pos" not in at.query_params and at.query_params.get("text") in ("", [""])


def test_a_default_text_follows_the_checkpoint_and_a_typed_text_stays(ckpt_dirs):
    """Picking a word-problem checkpoint while the text is still the last checkpoint's default gives the new
    one's default text (not an error); a typed text is kept, and the error says how to get back."""
    at = app(gl_ckpt=ref("osm"), gl_ckpt_b=ref("osm"))
    goto(at, "compare")
    osm_default = at.session_state["gl_text"]

    def side_a() -> list[str]:
        return [e for e in map(shown, errors(at)) if e.startswith("A (")]

    at.selectbox(key="w_gl_ckpt").set_value(ref("s3")).run()
    assert not at.exception and not side_a(), side_a()
    s3_default = at.session_state["gl_text"]
    assert s3_default != osm_default and set(s3_default) <= set("012 ")
    at.selectbox(key="w_gl_ckpt").set_value(ref("osm")).run()
    assert at.session_state["gl_text"] == osm_default and not side_a()
    at.session_state["gl_pos"] = 30
    at.text_area(key="w_text").set_value("a text I typed").run()
    assert at.session_state["gl_pos"] == 13  # moved to the last position, without a notice: the user did it
    assert not [w for w in at.warning if "past the end" in w.value]
    at.selectbox(key="w_gl_ckpt").set_value(ref("s3")).run()
    assert at.session_state["gl_text"] == "a text I typed"  # never replaced
    msg = next(e for e in side_a() if "Unknown symbols" in e)
    assert "Use the default text" in msg
    at.button(key="w_text_reset").click().run()
    assert at.session_state["gl_text"] == s3_default and not side_a()


def test_compare_says_which_side_cannot_read_the_text(ckpt_dirs):
    at = app(gl_ckpt=ref("osm"), gl_ckpt_b=ref("s3"))
    goto(at, "compare")
    assert not at.exception
    msg = next(shown(e) for e in errors(at) if "Unknown symbols" in e)
    assert msg.startswith("B (s3): Unknown symbols") and "choose a B that reads" in msg, msg
    assert "Use the default text" not in msg  # the button gives A's text, which B cannot read either


def test_a_text_over_the_limit_is_kept_and_can_be_cut(ckpt_dirs):
    """A pasted text over 2,048 characters is kept whole (no max_chars: Streamlit would drop the paste
    silently), refused with a message, and one click keeps its first 2,048 characters."""
    at = app(gl_ckpt=ref("osm"))
    goto(at, "trajectories")
    assert not at.text_area(key="w_text").max_chars  # 0: no limit in the box
    pasted = "".join(TEXT for _ in range(12))[:3000]
    at.text_area(key="w_text").set_value(pasted).run()
    assert at.session_state["gl_text"] == pasted
    # said once, in the page, with the button beside it (the sidebar may be folded or scrolled away)
    said = [e for e in errors(at) if "3,000 characters" in e]
    assert len(said) == 1 and "at most 2,048" in said[0], errors(at)
    assert not [w for w in at.sidebar.warning if "2,048" in w.value]
    assert at.button(key="w_text_cut").label == "Keep the first 2,048 characters"
    assert not at.get("plotly_chart")  # nothing traced from a text the views refuse
    at.button(key="w_text_cut").click().run()
    assert at.session_state["gl_text"] == pasted[:2048] and not errors(at) and not at.exception
    assert at.text_area(key="w_text").value == pasted[:2048]  # the sidebar's box shows the cut text


def test_symbol_checkpoint_rejects_unknown_symbols(ckpt_dirs):
    at = app(gl_ckpt=ref("s3"), gl_text="012 021 nope")
    goto(at, "compare")
    assert not at.exception
    assert any("Unknown symbols" in e for e in errors(at))


def test_cem_recursion_slider_retraces_with_more_steps(ckpt_dirs):
    at = app(gl_ckpt=ref("cem"), gl_text="But soft")
    goto(at, "energy")
    trained = at.slider(key="w_gl_steps").value
    at.slider(key="w_gl_steps").set_value(trained + 3).run()
    assert not at.exception and not errors(at)
    spec = json.loads(charts(at)[0].spec)
    xs = [x for d in spec["data"] if "mean" in (d.get("name") or "") for x in decode(d.get("x"))]
    assert max(x for x in xs if x is not None) == trained + 3  # the figure may break lines with None gaps


def test_checkpoints_page_lists_cards_and_validates_uploads(ckpt_dirs):
    runs, _ = ckpt_dirs
    at = app()
    goto(at, "checkpoints")
    assert not at.exception
    names = set(at.dataframe[0].value["name"])
    assert {"osm", "cem", "grassmann", "s3"} <= names
    # the cards in page order are the table's rows in order (a narrow screen stacks them as the page lists
    # them: two long columns put every left card before the right ones)
    import re

    titles = [m.group(1) for n in _in_order(at.main) if n.type == "markdown"
              for m in [re.match(r"\*\*(.+?)\*\*  :gray-badge", getattr(n, "value", ""))] if m]
    assert titles == [md_escape(n) for n in at.dataframe[0].value["name"]], titles
    # a bad upload: a JSON without its weights
    at.file_uploader(key="w_upload").upload("broken.json", b'{"model_config": {}}', "application/json")
    at.button[-1].click() if not at.get("form_submit_button") else None
    submit = [b for b in at.button if "Validate" in b.label]
    submit[0].click().run()
    assert any("Upload rejected" in e and "missing" in e for e in errors(at)), errors(at)
    # ... shown under the uploader, where the user pressed the button (not at the top of a long page)
    order = [(n.type, getattr(n, "value", "")) for n in _in_order(at.main)]
    upload_at = order.index(("subheader", "Upload a checkpoint"))
    assert [i for i, (t, v) in enumerate(order) if t == "error" and "Upload rejected" in v][0] > upload_at
    # a good upload: an existing checkpoint folder zipped under a new name
    at.file_uploader(key="w_upload").set_value([("mine.zip", _zip(runs / "osm"), "application/zip")])
    [b for b in at.button if "Validate" in b.label][0].click().run()
    assert not errors(at), errors(at)
    assert any("uploads/mine" in s.value for s in at.success)
    assert at.session_state["gl_ckpt"] == "runs/uploads/mine"
    catalog.delete_user_checkpoint("runs/uploads/mine", owner=owner(at))
    # the folder's files selected together: the folder's name comes with them (geomlab.json)
    at.file_uploader(key="w_upload").set_value([(f.name, f.read_bytes(), "application/octet-stream")
                                                for f in sorted((runs / "osm").iterdir())])
    [b for b in at.button if "Validate" in b.label][0].click().run()
    assert not errors(at), errors(at)
    assert at.session_state["gl_ckpt"] == "runs/uploads/osm"
    catalog.delete_user_checkpoint("runs/uploads/osm", owner=owner(at))


def _in_order(node):
    """Every element under an AppTest block, depth first, in page order."""
    yield node
    for child in getattr(node, "children", {}).values():
        yield from _in_order(child)


def _zip(folder: Path) -> bytes:
    """A checkpoint folder's files as a zip (what a browser uploads as one file), files at the top."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for f in sorted(folder.iterdir()):
            zf.write(f, f.name)
    return buf.getvalue()


def _train_widgets(at: AppTest, steps: int) -> None:
    at.selectbox(key="w_train_kind").set_value("lstm")
    at.number_input(key="w_train_steps").set_value(steps)
    at.number_input(key="w_train_batch").set_value(2)
    at.number_input(key="w_train_seq").set_value(8)


def test_train_page_starts_stops_resumes_and_saves_a_tiny_run(ckpt_dirs):
    at = app()
    goto(at, "train")
    assert any("No run on this page yet" in i.value for i in at.info)
    _train_widgets(at, steps=100_000)
    at.run()
    at.button(key="w_train_start").click().run()
    assert not errors(at), errors(at)
    run = live.REGISTRY.get(at.session_state["gl_live_run"])
    assert run is not None
    # the page wrote its owner token into the browser's cookie (a reload keeps control), not into the URL
    cookie = [h.proto.body for h in at.get("html") if _state.OWNER_COOKIE in h.proto.body]
    assert len(cookie) == 1 and f"{_state.OWNER_COOKIE}={run.owner};" in cookie[0], cookie
    assert run.owner not in str(at.query_params)
    try:
        live.wait_for(run, lambda s: s.step >= 2, timeout=TIMEOUT)
        at.run()
        assert at.button(key="w_train_start").disabled  # one run at a time
        assert at.get("progress")
        at.button(key="train-stop").click().run()
        snap = live.wait_for(run, lambda s: not s.active, timeout=TIMEOUT)
    finally:
        run.stop(wait=TIMEOUT, by=owner(at))
    assert snap.state == "stopped"
    at.run()
    assert not at.button(key="train-resume").disabled
    labels = {m.label: m.value for m in at.metric}
    assert labels["train loss"] != "–" and labels["tokens/s"] != "–"
    box = at.text_input(key=f"w_train_save_name_{run.run_id}")
    assert box.value.startswith("lstm-")  # a default name is offered
    box.set_value("from the app/../x 😀")
    at.button(key="train-save").click().run()
    # saved under the sanitised name, and the page says so
    assert any("`runs/from-the-app-x`" in s.value and "was changed" in s.value for s in at.success), \
        [s.value for s in at.success]
    assert at.session_state["gl_ckpt"] == "runs/from-the-app-x"
    assert "ckpt" not in at.query_params  # Train's URL carries only its own keys (the state follows the save)
    assert "runs/from-the-app-x" in [e.ref for e in catalog.list_checkpoints()]
    at.text_input(key=f"w_train_save_name_{run.run_id}").set_value("run.v2")  # a checkpoint folder keeps its dot
    at.button(key="train-save").click().run()
    assert at.session_state["gl_ckpt"] == "runs/run.v2", [s.value for s in at.success] + errors(at)
    assert any("`runs/run.v2`" in s.value and "changed" not in s.value for s in at.success)
    from app_pages._messages import shown_folder

    saved = [c.value for c in at.caption if c.value.startswith("saved: ")]
    assert saved and all(v == "saved: " + shown_folder(p) for v, p in
                         zip(saved, live.REGISTRY.get(run.run_id).snapshot().saved[-3:]))
    goto(at, "checkpoints")
    assert {"from-the-app-x", "run.v2"} <= set(at.dataframe[0].value["name"])
    live.REGISTRY.forget(run.run_id, by=owner(at))
    catalog.delete_user_checkpoint("runs/from-the-app-x", owner=owner(at))
    catalog.delete_user_checkpoint("runs/run.v2", owner=owner(at))


def test_train_page_reports_no_gpu_and_short_text(ckpt_dirs, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    at = app()
    goto(at, "train")
    _train_widgets(at, steps=5)
    at.selectbox(key="w_train_device").set_value("cuda")
    at.run()
    at.button(key="w_train_start").click().run()
    assert any("No GPU" in e for e in errors(at)), errors(at)
    at.selectbox(key="w_train_device").set_value("cpu")
    at.radio(key="w_train_source").set_value("Your text").run()
    at.text_area(key="w_train_text").set_value("too short").run()
    at.button(key="w_train_start").click().run()
    assert any("at least 100" in e for e in errors(at)), errors(at)
    assert not at.exception


def test_train_page_says_when_a_text_repeats_itself(ckpt_dirs):
    """A pasted passage copied many times: its validation split repeats its training split, and the run's
    note says so while it trains and once it has finished, beside its valid BPC."""
    at = app()
    goto(at, "train")
    _train_widgets(at, steps=2)
    at.radio(key="w_train_source").set_value("Your text").run()
    at.text_area(key="w_train_text").set_value(TEXT * 4).run()
    at.button(key="w_train_start").click().run()
    assert not errors(at), errors(at)
    run = live.REGISTRY.get(at.session_state["gl_live_run"])
    live.wait_for(run, lambda s: not s.active, timeout=TIMEOUT)
    at.run()  # the finished run: the note stays beside its valid BPC
    assert run.snapshot().state == "finished"
    assert any("also occur in the training text" in c.value for c in at.caption), [c.value for c in at.caption]
    live.REGISTRY.forget(run.run_id, by=owner(at))


def test_train_page_names_an_uploaded_text_by_its_file_and_digest(ckpt_dirs):
    import hashlib

    at = app()
    goto(at, "train")
    _train_widgets(at, steps=2)
    at.radio(key="w_train_source").set_value("Your text").run()
    at.file_uploader(key="w_train_upload").upload("sonnets.txt", TEXT.encode("utf-8"), "text/plain")
    at.run()
    at.button(key="w_train_start").click().run()
    assert not errors(at), errors(at)
    run = live.REGISTRY.get(at.session_state["gl_live_run"])
    assert run.task.name == f"sonnets.txt · {hashlib.sha256(TEXT.encode('utf-8')).hexdigest()[:8]}"
    assert run.task.spec()["chars"] == len(TEXT)
    live.wait_for(run, lambda s: not s.active, timeout=TIMEOUT)
    live.REGISTRY.forget(run.run_id, by=owner(at))


def test_train_page_starts_a_text_at_a_text_length_and_keeps_a_typed_one(ckpt_dirs):
    from app_pages._train_form import TEXT_SEQ

    at = app()
    goto(at, "train")
    seq = at.number_input(key="w_train_seq")
    short = seq.value
    assert short < TEXT_SEQ
    at.radio(key="w_train_source").set_value("Your text").run()
    assert at.number_input(key="w_train_seq").value == TEXT_SEQ
    at.radio(key="w_train_source").set_value("Synthetic task").run()
    assert at.number_input(key="w_train_seq").value == short
    at.number_input(key="w_train_seq").set_value(12).run()
    at.radio(key="w_train_source").set_value("Your text").run()
    assert at.number_input(key="w_train_seq").value == 12  # typed: kept
    assert not at.exception


def test_train_page_shows_the_nan_pause_message(ckpt_dirs):
    from geomlab.data.word_problem import WordProblemTask

    class NaNTask(WordProblemTask):
        def loss(self, outputs, targets):
            return super().loss(outputs, targets) * float("nan")

    run = live.REGISTRY.create(live.RunSpec(kind="lstm", params=2_000, steps=5, batch_size=2, seq_len=8,
                                            threads=1), task=NaNTask("S3", length=8, n_eval=8))
    run.start()
    live.wait_for(run, lambda s: not s.active, timeout=TIMEOUT)
    at = app(gl_live_run=run.run_id)
    goto(at, "train")
    assert not at.exception
    paused = [w.value for w in at.warning if "paused" in w.value]
    assert paused and "last good checkpoint" in paused[0] and "non-finite" in paused[0]
    assert not at.button(key="train-resume").disabled
    live.REGISTRY.forget(run.run_id)


@pytest.mark.data
def test_train_page_offers_a_registered_corpus_that_is_on_this_machine(ckpt_dirs):
    at = app()
    goto(at, "train")
    at.radio(key="w_train_source").set_value("Registered corpus").run()
    assert not at.exception
    corpus = at.selectbox(key="w_train_corpus")
    assert "tinyshakespeare" in corpus.options
    corpus.set_value("tinyshakespeare")
    _train_widgets(at, steps=2)
    at.run()
    at.button(key="w_train_start").click().run()
    assert not errors(at), errors(at)
    run = live.REGISTRY.get(at.session_state["gl_live_run"])
    snap = live.wait_for(run, lambda s: not s.active, timeout=300)
    assert snap.state == "finished" and snap.metric_name == "bpc" and snap.metric > 0
    live.REGISTRY.forget(run.run_id, by=owner(at))


def test_compare_the_same_cem_checkpoint_at_two_recursion_depths(ckpt_dirs):
    at = app(gl_ckpt=ref("cem"), gl_ckpt_b=ref("cem"), gl_text="But soft")
    goto(at, "compare")
    trained = at.slider(key="w_gl_steps_b").value
    at.slider(key="w_gl_steps_b").set_value(trained + 2).run()
    assert not at.exception and not errors(at)
    assert any(f"T = {trained + 2}" in m.value for m in at.markdown)
    assert at.query_params["TB"] in (str(trained + 2), [str(trained + 2)])  # B's T is in the URL like A's
    # the view's options sit in one expander above both columns (the columns start level)
    assert [x.label for x in at.expander].count("Options (both sides)") == 1
    assert "Options" not in [x.label for x in at.expander]
    assert len(charts(at)) >= 3


def test_a_reloaded_train_page_reattaches_to_its_run(ckpt_dirs):
    """A reload is a new session: the run id in the URL (and the recent-runs picker) re-attach to it."""
    run = live.REGISTRY.create(live.RunSpec(kind="lstm", params=2_000, steps=3, batch_size=2, seq_len=8,
                                            threads=1))
    run.start()
    live.wait_for(run, lambda s: not s.active, timeout=TIMEOUT)
    try:
        at = app()
        goto(at, "train")
        assert at.query_params.get("run") in (None, [])  # this session has no run of its own yet
        picker = at.selectbox(key="w_train_recent")
        assert run.run_id in picker.options or any(run.run_id[:6] in o for o in picker.options)
        # the picker is drawn once per page run: no state or step that would go stale while a run trains
        assert not any(w in o for o in picker.options for w in ("running", "finished", "step "))
        picker.set_value(run.run_id).run()
        assert at.session_state["gl_live_run"] == run.run_id
        assert any("state: **finished**" in m.value for m in at.markdown)
        assert at.query_params["run"] in (run.run_id, [run.run_id])
        # a fresh session opened on that URL (a page reload) shows the same run
        at2 = AppTest.from_file(APP, default_timeout=TIMEOUT)
        at2.query_params["run"] = run.run_id
        at2.switch_page("app_pages/train.py")
        at2.run()
        assert at2.session_state["gl_live_run"] == run.run_id
        assert not any("No run on this page yet" in i.value for i in at2.info)
        assert not at2.button(key="train-save").disabled
        # word-problem wording: loss per symbol, accuracy on whole steps 0..total, a compact time
        specs = [json.loads(c.spec) for c in charts(at2)]
        loss = next(s for s in specs if "Training curves" in json.dumps(s["layout"].get("title", "")))
        assert "nats per symbol" in loss["layout"]["yaxis"]["title"]["text"]
        assert "nats/symbol" in loss["data"][0]["hovertemplate"]
        acc = next(s for s in specs if "accuracy" in json.dumps(s["layout"].get("title", "")))
        assert acc["layout"]["xaxis"]["range"] == [0, 3] and acc["layout"]["xaxis"]["tickformat"] == ",d"
        assert acc["layout"]["xaxis"]["dtick"] == 1  # whole steps, no repeated labels from rounding
        bar = at2.get("progress")[0].proto.text  # the time, compact, in the bar's line (no tile of its own)
        assert re.fullmatch(r"step 3 / 3 · trained for \d+ s", bar), bar
        assert "time" not in {m.label for m in at2.metric}
    finally:
        live.REGISTRY.forget(run.run_id)


@pytest.mark.slow
def test_the_newcomer_defaults_visibly_learn_in_200_steps(ckpt_dirs):
    """Home promises "watch its loss fall": the Train page's untouched defaults must beat chance clearly."""
    at = app()
    goto(at, "train")
    ss = at.session_state
    spec = live.RunSpec(kind=at.selectbox(key="w_train_kind").value, group=at.selectbox(key="w_train_group").value,
                        params=at.select_slider(key="w_train_params").value,
                        data="word-problem:" + at.selectbox(key="w_train_task").value,
                        steps=int(at.number_input(key="w_train_steps").value),
                        batch_size=int(at.number_input(key="w_train_batch").value),
                        seq_len=int(at.number_input(key="w_train_seq").value),
                        lr=float(at.number_input(key="w_train_lr").value), seed=0, threads=1)
    assert spec.steps <= 400 and ss["gl_ckpt"]  # a short run
    run = live.LiveRun(spec).start()
    snap = live.wait_for(run, lambda s: not s.active, timeout=600)
    assert snap.state == "finished", snap.message
    losses = [h["loss"] for h in snap.history if "loss" in h]
    chance = 1 / 5 if spec.data == "word-problem:Z5" else 1 / 6 if spec.data == "word-problem:S3" else 1 / 2
    assert snap.metric > chance + 0.3, (spec, snap.metric)
    assert losses[-1] < 0.6 * losses[0], (losses[0], losses[-1])


# ---------------------------------------------------------------- word-problem checkpoints, wide figures
ASSETS = Path(__file__).resolve().parents[2] / "assets" / "checkpoints"


@pytest.fixture
def bundled_assets(zoo):
    """The real bundled checkpoints (assets/checkpoints) and an empty runs folder; no pre-warming."""
    return zoo


def open_page(slug: str, **query) -> AppTest:
    at = run_page(slug, **query)
    assert not errors(at), errors(at)
    return at


def surprisal_spec(at: AppTest) -> dict:
    return next(s for s in (json.loads(c.spec) for c in charts(at))
                if "Surprisal" in s["layout"]["title"]["text"])


def test_compare_scores_word_problem_models_on_the_running_product(bundled_assets):
    at = open_page("compare", ckpt="bundled/osm-rnn-o-s5", b="bundled/osm-rnn-torus-s5")
    spec = surprisal_spec(at)
    by_name = {d["name"].split(" (")[0]: d for d in spec["data"] if d.get("meta") != "chance"}
    assert set(by_name) == {"A: osm-rnn-o-s5", "B: osm-rnn-torus-s5"}
    # chance is a dotted line named in the legend, not a boxed label on the plot that could hide B's line
    chance = [d for d in spec["data"] if d.get("meta") == "chance"]
    assert len(chance) == 1 and chance[0]["name"] == "chance: log<sub>2</sub> 120 = 6.91 bits"
    assert np.allclose(decode(chance[0]["y"]), np.log2(120))
    assert not [a for a in spec["layout"].get("annotations", []) if "chance" in a.get("text", "")]
    a, b = (np.array(decode(by_name[k]["y"]), dtype=float) for k in ("A: osm-rnn-o-s5", "B: osm-rnn-torus-s5"))
    assert not np.isnan(a).any() and not np.isnan(b).any()  # position 0 is scored too
    assert a.mean() < 1.0 < np.log2(120) - 1 < b.mean()  # O(5) tracks S5; the torus is near chance
    assert "correct product" in spec["layout"]["yaxis"]["title"]["text"]
    assert any("running product" in c.value and "chance" in c.value for c in at.caption)
    assert not any("bits per character" in c.value for c in at.caption)


def test_compare_of_a_word_problem_and_a_language_model_says_they_differ(bundled_assets):
    at = open_page("compare", ckpt="bundled/osm-rnn-o-s5", b="bundled/osm-rnn-o-tinyshakespeare")
    spec = surprisal_spec(at)
    lines = [d for d in spec["data"] if d.get("meta") != "chance"]
    assert len(lines) == 2 and spec["layout"]["yaxis"]["title"]["text"] == "bits (see legend)"
    assert [d["name"].split(" (")[1].split(":")[0] for d in lines] == ["running product", "next token"]
    chance = [d for d in spec["data"] if d.get("meta") == "chance"]
    assert [d["name"] for d in chance] == ["A: chance: log<sub>2</sub> 120 = 6.91 bits"]
    assert max(decode(chance[0]["x"])) == len(decode(lines[0]["y"])) - 1  # along A's text only
    cap = next(c.value for c in at.caption if "Different tasks" in c.value)
    assert "A: osm-rnn-o-s5 is a group word-problem model" in cap and "B: osm-rnn-o-tinyshakespeare" in cap


def _table(at: AppTest):
    return at.dataframe[0].value


def test_checkpoints_page_and_compare_show_word_problem_accuracy(bundled_assets):
    card = card_s5 = read_meta(ASSETS / "osm-rnn-o-s5")["card"]
    at = open_page("checkpoints")
    df = _table(at)
    assert {"metric", "valid", "test"} <= set(df.columns) and "valid BPC" not in df.columns
    row = df[df["name"] == "osm-rnn-o-s5"].iloc[0]
    assert row["metric"].startswith("accuracy") and row["valid"] == f"{card['valid_accuracy']:.3f}"
    assert df[df["name"] == "lstm-tinyshakespeare"].iloc[0]["metric"].startswith("BPC")
    # the training steps beside the metric: a short-budget model is told from a converged one
    lstm_card = read_meta(ASSETS / "lstm-tinyshakespeare")["card"]
    assert df[df["name"] == "lstm-tinyshakespeare"].iloc[0]["trained"] == f"{lstm_card['steps']:,}"
    assert not df[["valid", "test"]].isna().any().any()
    assert not any(str(v) in ("None", "nan") for v in df[["valid", "test"]].to_numpy().ravel())
    # the numbers right after the name: at 800 px beside the sidebar only the metric and model scroll
    assert list(at.dataframe[0].proto.column_order)[:4] == ["name", "valid", "test", "trained"]
    # no column pinned: Streamlit draws a pinned column's text faded, a pale grey
    assert not any(c.get("pinned") for c in json.loads(at.dataframe[0].proto.columns).values())
    # on a phone (~390 px: the name and two columns) the metric comes first, or valid/test lose their unit
    from app_pages._messages import TABLE_COLUMNS, table_columns

    assert table_columns(False) == TABLE_COLUMNS and table_columns(True)[:4] == ["name", "metric", "valid", "test"]
    assert sorted(table_columns(True)) == sorted(TABLE_COLUMNS)
    # and on the page a phone gets: the metric first, the cards in one column in the table's order (two
    # columns stacked read all the left cards, then all the right ones)
    import app_pages._ui as ui_mod

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ui_mod, "is_phone", lambda: True)
        phone = goto(app(), "checkpoints")
    assert list(phone.dataframe[0].proto.column_order)[:2] == ["name", "metric"]
    names = list(_table(phone)["name"])
    shown = [m.value.split("**")[1].replace("\\", "") for m in phone.markdown
             if m.value.startswith("**") and ":gray-badge[" in m.value]
    assert shown == names and len(names) > 2, (shown, names)
    assert any(f"valid accuracy **{card['valid_accuracy']:.3f}**" in m.value for m in at.markdown)
    curve = [c.value for c in at.caption if c.value.startswith("final-position accuracy by length")]
    assert len(curve) == 4  # one per word-problem checkpoint
    s5 = next(c for c in curve if "1/120" in c)
    assert f"L=128 {card['accuracy_by_length']['128']:.2f}" in s5 and "L=2 1.00" in s5
    # each card names its title, its effective parameters (and the stored count where they differ: the S5 torus's
    # unread prototype entries), its description, and its notes above the JSON
    torus = read_meta(ASSETS / "osm-rnn-torus-s5")["card"]
    assert any(m.value == f"*{md_escape(torus['recipe']['title'])}*" for m in at.markdown)
    facts = f"{torus['params_effective']:,} effective parameters ({torus['params_stored']:,} stored)"
    assert torus["params_effective"] < torus["params_stored"] and any(facts in m.value for m in at.markdown)
    assert any(f"{card_s5['params_effective']:,} effective parameters ·" in m.value for m in at.markdown)
    assert any(c.value == md_escape(torus["recipe"]["description"]) for c in at.caption)
    assert any(m.value == md_escape(torus["notes"]) for m in at.markdown)
    cmp = open_page("compare", ckpt="bundled/osm-rnn-o-s5", b="bundled/osm-rnn-torus-s5")
    t = _table(cmp)
    assert list(t["valid"]) == [f"{card['valid_accuracy']:.3f}", f"{read_meta(ASSETS / 'osm-rnn-torus-s5')['card']['valid_accuracy']:.3f}"]
    assert sum("final-position accuracy by length" in c.value for c in cmp.caption) == 2


def _column_chart_titles(at: AppTest) -> list[str]:
    out = []
    for col in at.columns:
        out += [json.loads(c.spec)["layout"].get("title", {}).get("text", "") for c in charts(col)]
    return out


def _chart_titles(at: AppTest) -> list[str]:
    """Each chart's title, a title wrapped onto lines read as one line."""
    return [json.loads(c.spec)["layout"].get("title", {}).get("text", "").replace("<br>", " ") for c in charts(at)]


def test_figures_with_panels_side_by_side_are_drawn_full_width(bundled_assets):
    from app_pages import _views

    at = open_page("trajectories", ckpt="bundled/osm-rnn-torus-s5")
    torus = [t for t in _chart_titles(at) if "torus" in t.lower() or "angle" in t.lower()]
    assert torus, _chart_titles(at)
    assert not set(torus) & set(_column_chart_titles(at))
    side_by_side = [json.loads(c.spec) for c in charts(at)]
    narrow = set(_column_chart_titles(at))
    for spec in side_by_side:
        if _views.panels_side_by_side(spec):
            assert spec["layout"]["title"]["text"] not in narrow


def test_compare_draws_each_osmformer_map_as_its_own_square(bundled_assets):
    """An OSMFormer's similarity and attention weights are two square maps (not one two-panel figure that a
    phone squeezes): on Compare, A above B, each side's two maps are drawn at their square width."""
    from app_pages import _views

    cmp = open_page("compare", ckpt="bundled/osmformer-torus-tinyshakespeare",
                    b="bundled/osmformer-o-linear-tinyshakespeare")
    cmp.session_state["gl_compare_view"] = "attention"
    cmp.run()
    specs = [json.loads(c.spec) for c in charts(cmp)]
    maps = [s for s in specs if s["layout"]["title"]["text"].startswith(("Similarity", "Attention weights"))]
    assert len(maps) == 4 and all(_views.square_single_panel(s) for s in maps), [s["layout"]["title"] for s in maps]
    assert not any(_views.panels_side_by_side(s) for s in specs)


def test_compare_matches_layers_by_depth_and_says_so_on_each_chart(bundled_assets):
    """The options are A's and apply to both sides; a B with another number of layers shows the layer at the
    same relative depth, and each side's layer figures name the layer they show in their own title (no
    caption elsewhere). osmformer-o-linear has 3 layers, the CEM 4 (configs in assets/checkpoints)."""
    from geomlab.teach import views

    cmp = open_page("compare", ckpt="bundled/osmformer-o-linear-tinyshakespeare",
                    b="bundled/osmformer-torus-tinyshakespeare")
    cmp.session_state["gl_compare_view"] = "trajectories"
    cmp.run()
    assert not [c.value for c in cmp.caption if "has no layer" in c.value]
    titles = _chart_titles(cmp)
    # A's last layer (2 of 3) -> B's last (1 of 2)
    assert any(t.endswith(" · layer 1 of 2 (0 = first), matched by depth to A's layer 2 of 3") for t in titles), titles
    assert any(t.endswith(" · layer 2 of 3 (0 = first)") for t in titles), titles
    assert not any("A: " in t or "B: " in t for t in titles), titles  # the side heads its column, once
    cmp.session_state["gl_layer"] = 0
    cmp.run()
    titles = _chart_titles(cmp)
    assert any(t.endswith(" · layer 0 of 2 (0 = first), matched by depth to A's layer 0 of 3") for t in titles)
    assert not cmp.exception
    # two attention models of different depths: A (3 layers) at layer 1 -> the CEM's (4 layers) layer
    # round(1 * 3 / 2) = 2, named on B's attention maps
    cmp = open_page("compare", ckpt="bundled/transformer-alibi-tinyshakespeare", b="bundled/cem-t2-tinyshakespeare")
    cmp.session_state["gl_compare_view"] = "attention"
    cmp.session_state["gl_layer"] = 1
    cmp.run()
    assert not cmp.exception and not errors(cmp), errors(cmp)
    want = views.match_layer(1, 3, 4)
    titles = _chart_titles(cmp)
    # a title naming its layer says "of how many" there, once: "…, layer 2 of 4 · matched by depth to …"
    b_titles = [t for t in titles if "matched by depth" in t]
    assert want == 2 and b_titles and all(
        t.endswith(f"layer {want} of 4 · matched by depth to A's layer 1 of 3") and t.count("layer 2") == 1
        for t in b_titles), titles
    assert any(t.endswith(", layer 1 of 3") for t in titles), titles


def test_compare_draws_both_sides_of_a_figure_on_one_scale(bundled_assets):
    """Each figure both sides draw shares its colour range (diverging maps about 0) and value axis: A above
    B, the charts come in pairs (A's then B's) with one title before the layer note."""
    cmp = open_page("compare", ckpt="bundled/osmformer-o-linear-tinyshakespeare",
                    b="bundled/osmformer-u-tinyshakespeare")
    cmp.session_state["gl_compare_view"] = "tangents"
    cmp.run()
    specs = [json.loads(c.spec) for c in charts(cmp)]
    # (the update sizes mark each side's layer, so their titles end in that side's layer note)
    stem = [s["layout"]["title"]["text"].split(" · A: ")[0].split(" · B: ")[0].split(" · layer ")[0] for s in specs]
    pairs = [(specs[i], specs[i + 1]) for i in range(len(specs) - 1) if stem[i] == stem[i + 1]]
    assert len(pairs) >= 2, stem
    heat = lines = 0
    for a, b in pairs:
        for ta, tb in zip(a["data"], b["data"]):
            if ta["type"] == "heatmap":
                heat += 1
                assert (ta["zmin"], ta["zmax"]) == (tb["zmin"], tb["zmax"]), (ta.get("name"), ta["zmin"], tb["zmin"])
                if "zmid" in ta:
                    assert ta["zmid"] == tb["zmid"] == 0 and ta["zmin"] == -ta["zmax"]
        if all(t["type"] == "scatter" for t in a["data"]):
            lines += 1
            for key in (k for k in a["layout"] if k.startswith("yaxis")):
                assert a["layout"][key]["range"] == b["layout"][key]["range"], (stem, key)
    assert heat and lines, stem


def side_by_side(at: AppTest) -> AppTest:
    """Compare switched to its "A | B side by side" layout (the default is A above B)."""
    at.session_state["gl_compare_layout"] = "side"
    at.run()
    assert not at.exception and not errors(at), errors(at)
    return at


def test_compare_opens_a_above_b_with_square_maps_as_wide_as_they_are_tall(bundled_assets):
    """The default layout is A above B (the server cannot know the window's width; side by side each figure
    got ~260 px at a 1,000 px window): no figure in a column, each side labelled over each figure, and a
    square map is drawn at the width that makes its plot area square at its height (colour bar beside it)."""
    import plotly.graph_objects as go

    from app_pages import _views, compare

    at = open_page("compare", b="bundled/osmformer-o-linear-tinyshakespeare")
    assert at.session_state["w_gl_compare_layout"] == "stacked"
    assert not [c for col in at.columns for c in charts(col)]
    heads = [m.value for m in at.markdown if m.value.startswith(("**A: ", "**B: "))]
    # no header row (a label without the figure's name); the downloads' labels carry no " · "
    assert not [h for h in heads if " · " in h and " · *" not in h]
    assert sum(" · *" in h for h in heads) >= 4, heads
    specs = [json.loads(c.spec) for c in charts(at)]
    square = [s for s in specs if _views.square_single_panel(s)]
    assert square
    fig = go.Figure(square[0])
    lay, w = square[0]["layout"], compare.square_width(fig)
    m = lay["margin"]
    assert w - m["l"] - m["r"] - 90 == lay["height"] - m["t"] - m["b"] > 0
    # every title as the figure has it: the browser wraps it to the width the chart has (js/live_chart.js)
    assert not any("<br>" in s["layout"]["title"]["text"] for s in square)


def test_compare_side_by_side_marks_each_row_and_leaves_the_cached_figures_alone():
    """A's and B's copies of a figure side by side are one row (``meta.row``: the browser gives both the
    larger top margin their titles need); their titles are left to the browser to wrap, the cached figures
    are not changed, and one figure alone is drawn as it is."""
    import plotly.graph_objects as go

    from app_pages import _relayout

    title = "What position 37 attends to, layer 2, matched by depth to A's layer 3 of 4"
    orig = {k: go.Figure(go.Bar(y=[1, 2]), layout={"title": {"text": title}, "margin": {"t": 60},
                                                   "meta": {"view": "v"}}) for k in "AB"}
    narrow = {k: _relayout.narrow_copy(f) for k, f in orig.items()}
    out = _relayout.same_row(narrow, "cmp-v-fig")
    for k in "AB":
        assert out[k].layout.meta == {"view": "v", "row": "cmp-v-fig"}
        assert out[k].layout.title.text == title and out[k].layout.margin.t == 60
        assert orig[k].layout.meta == {"view": "v"}
    one = {"A": narrow["A"], "B": None}
    assert _relayout.same_row(one, "r") == one


def test_compare_side_by_side_labels_each_side_once_and_keeps_every_map_square_and_untitled(bundled_assets):
    """Compare CEM vs OSMFormer on attention, side by side: each side's full header once, over its first
    figure in that figure's column (a column that wraps under the other keeps its label); every map
    (the CEM's weights, the OSMFormer's similarity and weights) is a square panel in a half-width column
    with its colour bar beside it and its name in the title, not a subplot title that lands on the top tick
    label; each row of A and B is marked as one. (Compare's own default pairs the CEM with the
    Transformer; B is named here.)"""
    from app_pages import _views

    at = side_by_side(open_page("compare", b="bundled/osmformer-o-linear-tinyshakespeare"))
    assert at.session_state["gl_ckpt"] == "bundled/cem-t2-tinyshakespeare"
    assert at.session_state["gl_ckpt_b"] == "bundled/osmformer-o-linear-tinyshakespeare"
    assert at.session_state["gl_compare_view"] == "attention"
    heads = [m.value for m in at.markdown if m.value.startswith(("**A: ", "**B: ")) and " · " in m.value]
    assert heads == ["**A: cem-t2-tinyshakespeare** · cem", "**B: osmformer-o-linear-tinyshakespeare** · osmformer · O"]
    for col in at.columns:  # a column holding a chart is labelled with its side before the chart
        if charts(col):
            first = next(iter(col.children.values()))
            label = getattr(first, "value", "")
            assert shown(label).startswith(("A: ", "B: ", "**A: ", "**B: ")) or "no " in shown(label), label
    in_cols = [json.loads(c.spec) for col in at.columns for c in charts(col)]
    maps = [s for s in in_cols if s["layout"]["title"]["text"].startswith(("Similarity", "Attention weights"))]
    assert len(maps) == 3 and all(_views.square_single_panel(m) for m in maps)
    for m in maps:
        assert not m["layout"].get("annotations")  # no subplot title
        assert m["layout"]["xaxis"]["constraintoward"] == "left"
        title = m["layout"]["title"]["text"]
        assert title.count("<sub>") == title.count("</sub>") and "</su<br>" not in title, title
    rows = [r for r in ((s["layout"].get("meta") or {}).get("row") for s in in_cols) if r]
    assert rows and all(rows.count(r) == 2 for r in rows), rows  # A's and B's copy of a figure
    assert not any(_views.panels_side_by_side(json.loads(c.spec)) for c in charts(at))


def test_compare_word_problems_label_each_side_once_above_the_side_by_side_figures(bundled_assets):
    at = side_by_side(open_page("compare", ckpt="bundled/osm-rnn-o-s5", b="bundled/osm-rnn-torus-s5"))
    heads = [m.value for m in at.markdown if m.value.startswith(("**A: ", "**B: "))]
    # one full header per side over the side-by-side figures, one label over B's full-width torus figure
    assert sum(h.startswith("**A: osm-rnn-o-s5") for h in heads) == 1, heads
    assert sum(h.startswith("**B: osm-rnn-torus-s5") for h in heads) == 2, heads
    assert any("torus angles" in h for h in heads)
    # the empty cell beside A's eigenvalue circle says why B has none (the torus draws its angles instead)
    notes = [shown(c.value) for c in at.caption]
    assert "B (osm-rnn-torus-s5): no eigenvalues on the circle; it shows torus angles in its place." in notes, notes
    assert "A (osm-rnn-o-s5): no torus angles; it does not apply to this model's group, O." in notes, notes
    # and a figure that does not apply to one side's kind says so too (CEM vs OSMFormer: no similarity for A)
    at = side_by_side(open_page("compare", b="bundled/osmformer-o-linear-tinyshakespeare"))
    notes = [shown(c.value) for c in at.caption]
    assert "A (cem-t2-tinyshakespeare): no state similarity map; it does not apply to this model." in notes, notes


def test_sidebar_checkpoint_options_are_short_and_the_full_title_is_a_caption(bundled_assets):
    at = open_page("trajectories", ckpt="bundled/osmformer-o-linear-tinyshakespeare")
    box = at.sidebar.selectbox[0]
    assert max(len(o) for o in box.options) <= 28, box.options
    assert box.value == "bundled/osmformer-o-linear-tinyshakespeare"
    assert "osmformer-o-linear · 88k" in box.options
    assert len(set(box.options)) == len(box.options)
    assert any(shown(c.value).startswith("osmformer-o-linear-tinyshakespeare (osmformer · O · 88k params")
               for c in at.sidebar.caption)


# ------------------------------------------------------------------ files and sessions
EVIL = "[click](http://evil.example) **bold** <b>x</b>"


def _literal(body: str) -> None:
    """``body`` (markdown source of an app message) shows EVIL as text: no link, emphasis or HTML."""
    for active in ("[click](http", "](", "http://", "**bold**", "<b>"):
        assert active not in body, (active, body)
    assert r"\[click\]\(http\:\/\/evil\.example\)" in body, body


def test_link_values_are_echoed_literally_never_as_markdown(ckpt_dirs):
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["ckpt"] = EVIL
    at.query_params["pos"] = EVIL
    at.run()
    assert not at.exception
    notices = [w.value for w in at.warning if "link" in w.value]
    assert notices, [w.value for w in at.warning]
    _literal(notices[0])
    # the Train page's run id from the URL
    at2 = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at2.query_params["run"] = EVIL
    at2.switch_page("app_pages/train.py")
    at2.run()
    assert not at2.exception
    msgs = [e for e in errors(at2) if "is not one it started" in e]
    assert msgs, errors(at2)
    _literal(msgs[0])


def test_a_links_run_id_says_whether_the_server_ever_held_it(ckpt_dirs, tmp_path):
    """`/train?run=bogus` said the run was lost to a restart, though no such run ever existed."""
    runs, _ = ckpt_dirs
    gone = "0123456789"
    (runs / ".live" / gone).mkdir(parents=True)
    try:
        for rid, want, not_want in ((gone, "is no longer held by this server (it was restarted)", "No run"),
                                    ("abcdef9876", "No run 'abcdef9876' on this server", "no longer held"),
                                    ("../" + gone, "No run", "no longer held")):
            at = AppTest.from_file(APP, default_timeout=TIMEOUT)
            at.query_params["run"] = rid
            at.switch_page("app_pages/train.py")
            at.run()
            assert not at.exception
            errs = errors(at)
            assert any(want in e for e in errs) and not any(not_want in e for e in errs), (rid, errs)
    finally:
        (runs / ".live" / gone).rmdir()


def test_upload_messages_show_file_names_literally(ckpt_dirs):
    at = app()
    goto(at, "checkpoints")
    at.file_uploader(key="w_upload").set_value([(EVIL + ".json", b"", "application/json"),
                                                ("w.safetensors", b"x", "application/octet-stream")])
    [b for b in at.button if "Validate" in b.label][0].click().run()
    msgs = [e for e in errors(at) if "Upload rejected" in e]
    assert msgs and "empty" in msgs[0], errors(at)
    _literal(msgs[0])


def test_checkpoints_page_deletes_only_this_sessions_uploads(ckpt_dirs, monkeypatch):
    monkeypatch.delenv("GEOMLAB_SHARED_RUNS", raising=False)
    runs, _ = ckpt_dirs
    at = app()
    goto(at, "checkpoints")
    assert not [b for b in at.button if b.label == "Delete"]  # the runs made outside this session: not its own
    at.file_uploader(key="w_upload").set_value([("own.zip", _zip(runs / "osm"), "application/zip")])
    [b for b in at.button if "Validate" in b.label][0].click().run()
    assert not errors(at), errors(at)
    assert len([b for b in at.button if b.label == "Delete"]) == 1  # its own upload
    badge = lambda page: next(m.value for m in page.markdown if m.value.startswith("**own**"))  # noqa: E731
    assert ":gray-badge[yours]" in badge(at)
    other = app()  # another browser session sees the upload but cannot delete it
    goto(other, "checkpoints")
    assert "own" in set(other.dataframe[0].value["name"])
    assert not [b for b in other.button if b.label == "Delete"]
    assert ":gray-badge[in runs/]" in badge(other)  # not "yours": it cannot delete it
    [b for b in at.button if b.label == "Delete"][0].click().run()
    assert any("Deleted" in s.value for s in at.success), [s.value for s in at.success]
    assert "runs/uploads/own" not in [e.ref for e in catalog.list_checkpoints()]
    assert (runs / "osm" / "geomlab.json").exists()


def test_a_checkpoint_card_says_selected_once_and_a_run_stopped_early_says_so(ckpt_dirs, tmp_path, monkeypatch):
    """A baseline's card (no view of its own) offers Select until it is the selection, then shows it selected
    with the button off; a checkpoint saved before its last step says "steps: 2 of 10 (stopped early)", or
    why: "(paused: diverged at step 7)"."""
    from geomlab.checkpoints import io as ckpt

    runs, _ = ckpt_dirs
    shutil.copytree(runs, tmp_path / "runs")
    c = ckpt.load(runs / "s3")
    ckpt.save(tmp_path / "runs" / "early", c.model, c.vocab, {**c.card, "total_steps": 10})
    ckpt.save(tmp_path / "runs" / "blown", c.model, c.vocab,
              {**c.card, "total_steps": 10, "diverged_at": {"step": 7, "quantity": "loss"}})
    monkeypatch.setenv("GEOMLAB_RUNS_DIR", str(tmp_path / "runs"))
    at = app()
    goto(at, "checkpoints")
    pick = next(b for b in at.button if b.label == "Select" and b.key.startswith("select-"))
    pick.click().run()
    chosen = at.session_state["gl_ckpt"]
    cards = [m.value for m in at.markdown if ":green-badge[selected]" in m.value]
    assert len(cards) == 1 and cards[0].startswith(f"**{chosen.split('/')[-1]}**"), cards
    done = at.button(key=pick.key)
    assert done.label == "Selected" and done.disabled
    notes = [c.value.replace("\\", "") for c in at.caption if c.value.startswith("corpus:")]  # markdown escapes
    assert any(n.endswith("steps: 2 of 10 (stopped early) · runs/early") for n in notes), notes
    assert any(n.endswith("steps: 2 of 10 (paused: diverged at step 7) · runs/blown") for n in notes), notes
    assert not any("stopped early" in n or "diverged" in n for n in notes
                   if not n.endswith(("runs/early", "runs/blown"))), notes


def test_a_checkpoint_whose_weights_changed_is_marked_and_cannot_be_selected(ckpt_dirs, tmp_path, monkeypatch):
    """A damaged copy in runs/ is marked in the table and on its card (the loader's message, naming the
    command that records the sum of weights changed on purpose), its buttons off; weights damaged after the
    page was drawn are refused on the click, with the message, and nothing is selected."""
    from app_pages import _data

    runs, _ = ckpt_dirs
    shutil.copytree(runs, tmp_path / "runs")
    monkeypatch.setenv("GEOMLAB_RUNS_DIR", str(tmp_path / "runs"))
    first = _data.default_ref(found=catalog.list_checkpoints())
    weights = catalog.resolve(first).weights
    change_one_value(weights)
    assert _data.default_ref(found=catalog.list_checkpoints()) not in (first, None)  # passed over: it will not load
    shutil.copy2(runs / weights.relative_to(tmp_path / "runs"), weights)  # a good copy again
    change_one_value(tmp_path / "runs" / "s3" / "model.safetensors")
    at = goto(app(), "checkpoints")
    assert not at.exception
    names = list(at.dataframe[0].value["name"])
    assert "⚠ s3" in names and "⚠ osm" not in names and "osm" in names
    assert any("runs/s3" in shown(c.value) and "will not load" in c.value for c in at.caption)
    card = next(m.value for m in at.markdown if m.value.startswith("**s3**"))
    assert ":red-badge[changed since saved]" in card
    [message] = [shown(e) for e in errors(at)]
    assert message.startswith("s3/model.safetensors changed since it was written") and \
        message.endswith(f"`geomlab zoo --accept-weights {tmp_path / 'runs' / 's3'}`")
    assert at.button(key=f"select-{names.index('⚠ s3')}").disabled
    before = at.session_state["gl_ckpt"]
    change_one_value(tmp_path / "runs" / "osm" / "model.safetensors")  # after the page was drawn
    i = names.index("osm")
    at.button(key=f"open-{i}-trajectories").click().run()
    assert at.session_state["gl_ckpt"] == before != "runs/osm"
    assert any(e.startswith("Not selected: osm/model.safetensors changed since it was written") for e in
               map(shown, errors(at))), errors(at)


def test_another_sessions_run_can_be_watched_not_changed(ckpt_dirs, monkeypatch):
    monkeypatch.delenv("GEOMLAB_SHARED_RUNS", raising=False)
    someone = "f" * 32
    run = live.REGISTRY.create(live.RunSpec(kind="lstm", params=2_000, steps=3, batch_size=2, seq_len=8,
                                            threads=1), owner=someone)
    run.start(by=someone)
    live.wait_for(run, lambda s: not s.active, timeout=TIMEOUT)
    try:
        at = AppTest.from_file(APP, default_timeout=TIMEOUT)
        at.query_params["run"] = run.run_id
        at.switch_page("app_pages/train.py")
        at.run()
        assert at.session_state["gl_live_run"] == run.run_id  # watching it
        assert at.button(key="train-save").disabled and at.button(key="train-resume").disabled
        assert any("another browser session" in c.value for c in at.caption)
        assert at.query_params.get("key") in (None, [])  # its owner's token is never put in this URL
        # the form (for a new run) shows its defaults, and says so; one click copies the run's settings
        assert any("not those of the run shown" in c.value for c in at.caption)
        assert at.selectbox(key="w_train_kind").value != "lstm" or at.number_input(key="w_train_steps").value != 3
        at.button(key="w_train_use_settings").click().run()
        assert at.selectbox(key="w_train_kind").value == "lstm" and at.number_input(key="w_train_steps").value == 3
        assert at.number_input(key="w_train_batch").value == 2 and at.number_input(key="w_train_seq").value == 8
        assert at.selectbox(key="w_train_task").value == "S3"
        assert not [b for b in at.button if b.key == "w_train_use_settings"]  # nothing left to copy
        # a URL naming the owner's token gives no control (an address is what people copy and share) ...
        thief = AppTest.from_file(APP, default_timeout=TIMEOUT)
        thief.query_params["run"], thief.query_params["key"] = run.run_id, someone
        thief.switch_page("app_pages/train.py")
        thief.run()
        assert thief.button(key="train-save").disabled
        assert thief.query_params.get("key") in (None, [])  # and the URL drops it
        # ... while the owner's browser (its cookie: a reload, another tab) keeps control
        monkeypatch.setattr(_state, "cookie_token", lambda: someone)
        own = AppTest.from_file(APP, default_timeout=TIMEOUT)
        own.query_params["run"] = run.run_id
        own.switch_page("app_pages/train.py")
        own.run()
        assert not own.button(key="train-save").disabled
        assert own.query_params.get("key") in (None, [])
    finally:
        live.REGISTRY.forget(run.run_id, by=someone)


def test_train_save_keeps_an_existing_checkpoint_of_that_name(ckpt_dirs, monkeypatch):
    monkeypatch.delenv("GEOMLAB_SHARED_RUNS", raising=False)
    runs, _ = ckpt_dirs
    before = {f.name: f.read_bytes() for f in (runs / "osm").iterdir()}
    at = app()
    goto(at, "train")
    _train_widgets(at, steps=2)
    at.run()
    at.button(key="w_train_start").click().run()
    run = live.REGISTRY.get(at.session_state["gl_live_run"])
    live.wait_for(run, lambda s: not s.active, timeout=TIMEOUT)
    at.run()
    try:
        at.text_input(key=f"w_train_save_name_{run.run_id}").set_value("osm")
        at.button(key="train-save").click().run()
        assert any("`runs/osm-2`" in s.value and "already exists" in s.value for s in at.success), \
            [s.value for s in at.success] + errors(at)
        assert {f.name: f.read_bytes() for f in (runs / "osm").iterdir()} == before
        at.button(key="train-save").click().run()  # saving again: over its own osm-2, not a third name
        assert not (runs / "osm-3").exists() and (runs / "osm-2" / "geomlab.json").exists()
    finally:
        live.REGISTRY.forget(run.run_id, by=owner(at))
        catalog.delete_user_checkpoint("runs/osm-2", owner=owner(at))


@pytest.mark.parametrize("slug", list(VIEW_CKPT))
def test_a_view_opens_on_its_default_figures_and_more_figures_shows_the_rest(ckpt_dirs, slug):
    """a view page draws its small default set only (the others are not even built), in the
    registry's order; the "More figures" switch adds the rest below, and stays on for the next page."""
    from geomlab.teach import views

    at = app(gl_ckpt=ref(VIEW_CKPT[slug]))
    goto(at, slug)
    assert not at.exception, [e.value for e in at.exception]
    tr = _registry_trace(VIEW_CKPT[slug])
    default = [f.name for f in views.default_figures(slug, tr)]
    more = [f.name for f in views.more_figures(slug, tr)]
    names = [c.key.split(f"{slug}-", 1)[1] for c in charts(at)]
    failed = [i.value.split(":")[0].replace(" ", "_") for i in at.info]
    assert names == [n for n in default if n not in failed] and names, (names, default)
    assert len(default) <= views.MAX_DEFAULT
    if not more:
        assert not [t for t in at.toggle if t.key == "w_more_figures"]
        return
    toggle = at.toggle(key="w_more_figures")
    assert toggle.value is False and toggle.label == f"More figures ({len(more)})"
    toggle.set_value(True).run()
    assert not at.exception, [e.value for e in at.exception]
    names = [c.key.split(f"{slug}-", 1)[1] for c in charts(at)]
    failed = [i.value.split(":")[0].replace(" ", "_") for i in at.info]
    assert names == [n for n in default + more if n not in failed], (names, default, more)
    assert len(names) > len(default) or set(more) <= set(failed)
    other = next(s for s in VIEW_CKPT if s != slug)
    goto(at, other)  # the switch stays on across pages
    assert at.session_state["gl_more_figures"] is True


def test_two_checkpoints_of_one_name_are_told_apart_in_the_select():
    """A run and its upload share a name: the select labels add the folder; a lone name stays short."""
    from types import SimpleNamespace

    from app_pages._widgets import short_labels

    found = [SimpleNamespace(name="osmf-small", corpus="text", params=21_000, ref="runs/osmf-small"),
             SimpleNamespace(name="osmf-small", corpus="text", params=21_000, ref="runs/uploads/osmf-small"),
             SimpleNamespace(name="lstm-tinyshakespeare", corpus="tinyshakespeare", params=50_375,
                             ref="bundled/lstm-tinyshakespeare")]
    labels = short_labels(found)
    assert labels["runs/osmf-small"] == "osmf-small · 21k · runs"
    assert labels["runs/uploads/osmf-small"] == "osmf-small · 21k · runs/uploads"
    assert labels["bundled/lstm-tinyshakespeare"] == "lstm · 50k"
    assert len(set(labels.values())) == 3


def test_the_runs_folder_is_named_relative_to_the_app(tmp_path, monkeypatch):
    """The Checkpoints caption names the runs folder as `runs/` when it is the app's own, never the server's
    absolute path; a folder elsewhere (GEOMLAB_RUNS_DIR) is named as given."""
    from app_pages._messages import md_escape, shown_folder

    monkeypatch.chdir(tmp_path)
    assert shown_folder(tmp_path / "runs") == md_escape("runs/") and str(tmp_path) not in shown_folder(tmp_path / "runs")
    other = tmp_path.parent / "elsewhere"
    assert shown_folder(other) == md_escape(str(other))


@pytest.mark.parametrize("slug, a, b", [
    ("attention", "transformer-alibi-tinyshakespeare", None), ("energy", "cem-t2-tinyshakespeare", None),
    ("planes", "grassmann-tinyshakespeare", None), ("tangents", "osmformer-o-linear-tinyshakespeare", None),
    ("compare", "osmformer-o-linear-tinyshakespeare", "osmformer-torus-tinyshakespeare")])
def test_a_link_reopens_every_choice_of_the_view(bundled_assets, slug, a, b):
    """A teacher's link is the teacher's picture: the page's choice controls (head, sub-block, offset slot,
    update), the "More figures" switch and Compare's layout go into the URL (left out at their defaults), and
    a fresh session opened on that URL shows the same figures."""
    at = app(gl_ckpt=f"bundled/{a}", gl_ckpt_b=b and f"bundled/{b}")
    goto(at, slug)
    assert not at.exception and not errors(at), errors(at)
    for key in ("head", "slot", "block", "substep", "more", "layout"):
        assert key not in at.query_params  # every choice at its default: a short link
    changed = []
    for wkey in ("w_gl_head", "w_gl_slot", "w_gl_substep"):
        found = [w for w in at.selectbox if w.key == wkey] + [w for w in at.radio if w.key == wkey]
        if found and len(found[0].options) > 1:  # the last choice (head: -1, the mean, comes first)
            found[0].set_value(len(found[0].options) - (2 if wkey == "w_gl_head" else 1)).run()
            changed.append(wkey)
    if [w for w in at.radio if w.key == "w_gl_block"]:
        at.radio(key="w_gl_block").set_value(1).run()
        changed.append("w_gl_block")
    if slug == "compare":
        at.session_state["gl_compare_layout"] = "side"
        at.run()
        changed.append("layout")
    elif [t for t in at.toggle if t.key == "w_more_figures"]:
        at.toggle(key="w_more_figures").set_value(True).run()
        changed.append("more")
    assert changed and not at.exception and not errors(at), errors(at)
    link = {k: (v[0] if isinstance(v, list) else v) for k, v in dict(at.query_params).items()}
    for key, name in (("w_gl_head", "head"), ("w_gl_slot", "slot"), ("w_gl_substep", "substep"),
                      ("w_gl_block", "block"), ("more", "more"), ("layout", "layout")):
        assert (name in link) == (key in changed), (name, link)
    student = AppTest.from_file(APP, default_timeout=TIMEOUT)
    student.query_params.update(link)
    student.switch_page(f"app_pages/{slug}.py")
    student.run()
    assert not student.exception and not errors(student), errors(student)
    assert [c.spec for c in charts(student)] == [c.spec for c in charts(at)]



def open_link(params: dict, page: str) -> AppTest:
    """A fresh session opened from a link to ``page`` with these query parameters."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update(params)
    at.switch_page(f"app_pages/{page}.py")
    return at.run()


def test_link_values_for_controls_not_on_screen_are_named_and_dropped(bundled_assets):
    """layer=5 on a one-layer model, substep=9 while its figure is under "More figures", a layer on a pair of
    baselines and a repeated key all stayed in the URL silently."""
    at = open_link({"ckpt": "bundled/osm-rnn-o-tinyshakespeare", "layer": "5"}, "trajectories")
    assert any("Layer = 5 is not available: this model has only layer 0, shown here" in w.value for w in at.warning), \
        [w.value for w in at.warning]
    assert "layer" not in at.query_params and not at.exception
    # a two-layer model keeps the generator heatmap under "More figures": its substep control is not drawn
    at = open_link({"ckpt": "bundled/osmformer-u-tinyshakespeare", "substep": "9"}, "tangents")
    assert any("Update 9 (the link's `substep=9`) is not one of this model's choices (0, "
               "1); dropped." in w.value for w in at.warning), [w.value for w in at.warning]
    assert "substep" not in at.query_params and not at.exception
    # a one-layer model opens Tangents on the generator heatmap, whose one update is shown
    at = open_link({"ckpt": "bundled/osm-rnn-o-tinyshakespeare", "substep": "9"}, "tangents")
    assert any("Update 9 is not one of this model's choices: it has only one, shown here."
               in w.value for w in at.warning), [w.value for w in at.warning]
    assert "substep" not in at.query_params and not at.exception
    at = open_link({"ckpt": "bundled/lstm-tinyshakespeare", "b": "bundled/lstm-tinyshakespeare",
                            "layer": "5", "view": "attention"}, "compare")
    assert not at.exception and "layer" not in at.query_params and "view" not in at.query_params, \
        at.query_params.to_dict()
    assert at.query_params["b"] == "bundled/lstm-tinyshakespeare"


def test_a_repeated_url_key_is_written_once(monkeypatch):
    """A tour link's `lesson=a&lesson=b` stayed in the URL: the last value was used, the pair kept. (AppTest's
    query parameters hold one value a key, so the URL is stood in for here.)"""
    from types import SimpleNamespace

    from app_pages import _state

    class URL:
        def __init__(self, pairs):
            self.pairs = pairs

        def to_dict(self):
            return dict(self.pairs)  # the last value of a key, as Streamlit's

        def get_all(self, key):
            return [v for k, v in self.pairs if k == key]

        def __iter__(self):
            return iter(dict(self.pairs))

        def from_dict(self, d):
            self.pairs = list(d.items())

    for pairs, want in (([("lesson", "a"), ("lesson", "b")], [("lesson", "b")]), ([("lesson", "b")], None)):
        url = URL(list(pairs))
        url.from_dict = lambda d, url=url: setattr(url, "written", list(d.items()))
        monkeypatch.setattr(_state, "st", SimpleNamespace(query_params=url,
                                                          session_state={_state.K_PAGE_QP: {"lesson": "b"}}))
        _state.sync_query_params("tour")
        assert getattr(url, "written", None) == want


def test_bad_choice_values_in_a_link_are_named_not_silently_dropped(bundled_assets):
    at = open_link({"ckpt": "bundled/transformer-alibi-tinyshakespeare", "head": "-2", "more": "maybe"},
                   "attention")
    notes = " ".join(shown(w.value) for w in at.warning)
    assert "head='-2': it must be a head ≥ 0" in notes and "more='maybe': not 0 or 1" in notes, notes
    assert "head" not in at.query_params and "more" not in at.query_params  # the URL is normalised
    at = open_link({"ckpt": "bundled/transformer-alibi-tinyshakespeare", "head": "99"}, "attention")
    assert any("Head 99 is not one of this model's choices: showing mean over heads" in w.value
               for w in at.warning), [w.value for w in at.warning]
    assert "head" not in at.query_params and not at.exception
    # a model with one choice draws no control, yet a link's value it lacks is still named (the bundled
    # Grassmann model has one offset per layer); the one head of a one-head model is no such value
    at = open_link({"ckpt": "bundled/grassmann-tinyshakespeare", "slot": "3"}, "planes")
    assert any("Offset slot 3 is not one of this model's choices: it has only one" in w.value
               for w in at.warning), [w.value for w in at.warning]
    assert "slot" not in at.query_params and at.session_state["gl_slot"] == 0 and not at.exception
    at = open_link({"ckpt": "bundled/osmformer-o-linear-tinyshakespeare", "head": "0"}, "attention")
    assert not [w.value for w in at.warning if "choices" in w.value] and not at.exception
    at = open_link({"ckpt": "bundled/osmformer-o-linear-tinyshakespeare", "layout": "diagonal"}, "compare")
    assert any("layout='diagonal': not one of stacked, side" in shown(w.value) for w in at.warning)
    assert at.session_state["gl_compare_layout"] == "stacked" and "layout" not in at.query_params


def test_on_a_phone_titles_are_left_to_the_browser_and_the_toolbar_keeps_only_the_download(bundled_assets, monkeypatch):
    """A phone (its browser's User-Agent, ``_widgets.is_phone``) gets copies of the cached figures with square
    maps sized to its width and a toolbar without the zoom and pan buttons that covered the titles; a desktop
    gets the figures as cached. Titles keep their text: the browser wraps them to the chart's width
    (``fitTitle``), on a phone as on a desktop, so no second wrap at a fixed count of characters."""
    from app_pages import _widgets

    def specs(phone: bool) -> list[tuple[dict, dict]]:
        monkeypatch.setattr(_widgets, "is_phone", lambda: phone)
        at = open_page("attention", ckpt="bundled/osmformer-o-linear-tinyshakespeare")
        return [(json.loads(c.spec), json.loads(c.config)) for c in charts(at)]

    desk, phone = specs(False), specs(True)
    assert len(desk) == len(phone) >= 4
    titles = [(d["layout"]["title"], p["layout"]["title"]) for (d, _), (p, _) in zip(desk, phone)]
    assert any(len(d["text"]) > 40 for d, _ in titles)  # "Over the text: what position ... attends to, layer 2"
    for d, p in titles:
        assert p["text"] == d["text"] and p.get("y") == d.get("y"), (d, p)
    squares = [s for s, _ in phone if (s["layout"].get("yaxis") or {}).get("scaleanchor")]
    assert squares and all(s["layout"]["height"] == 400 for s in squares)
    assert all("zoom2d" in c["modeBarButtonsToRemove"] for _, c in phone)
    assert not any("zoom2d" in c["modeBarButtonsToRemove"] for _, c in desk)


def test_a_phone_draws_compare_a_above_b_even_when_the_link_says_side_by_side(bundled_assets, monkeypatch):
    """Side by side, a phone's stacked columns put the header row above A's figure and B's label over nothing;
    on a phone every figure is drawn A above B under its own label, and a caption says why."""
    from app_pages import _ui, _widgets

    for module in (_widgets, _ui):
        monkeypatch.setattr(module, "is_phone", lambda: True)
    at = open_page("compare", b="bundled/osmformer-o-linear-tinyshakespeare", layout="side")
    assert at.session_state["gl_compare_layout"] == "side"  # the link's choice is kept (and shared on)
    assert any("On a phone A and B stand one above the other" in c.value for c in at.caption)
    heads = [m.value for m in at.markdown if m.value.startswith(("**A: ", "**B: ")) and " · *" in m.value]
    assert heads and all(" · *" in h for h in heads)  # each figure under its own side's label
    assert not [c for col in at.columns for c in charts(col)]  # no figure in a column


def test_a_text_past_the_training_length_warns_where_the_model_stops_reading_it(zoo):
    """The bundled CEM (RoPE, trained on 128 tokens) guesses at about chance past position 127 of a long text:
    its view says so with the measured bits per token; an OSM-RNN, which extrapolates, gets no warning."""
    from geomlab.bench.load.texts import session_texts

    text = session_texts(1, 900)[0]
    at = run_page("energy", ckpt="bundled/cem-t2-tinyshakespeare", text=text)
    note = [w.value for w in at.warning if "trained on 128-token sequences" in w.value]
    assert len(note) == 1, [w.value for w in at.warning]
    import re

    inside, past = map(float, re.search(r"cost ([\d.]+) bits per token up to position 127, ([\d.]+) after", note[0]).groups())
    assert past > inside + 1.0  # the numbers shown are the ones the warning is about
    at = run_page("trajectories", ckpt="bundled/osm-rnn-o-tinyshakespeare", text=text)
    assert not [w.value for w in at.warning if "trained on" in w.value]
    # Compare says it of the side it applies to, under its surprisal chart
    at = run_page("compare", ckpt="bundled/osm-rnn-o-tinyshakespeare", b="bundled/cem-t2-tinyshakespeare", text=text)
    assert [w.value for w in at.warning if "trained on" in w.value] == note


def test_every_url_key_is_in_the_docs_table():
    """Each key the app writes into an address has a row of docs/app.md's URL-key table."""
    table = (Path(APP).parent / "docs" / "app.md").read_text(encoding="utf-8").split("| URL key | meaning |")[1]
    table = table.split("\n\n")[0]
    documented = set(re.findall(r"`([a-zA-Z]+)`", "\n".join(line.split("|")[1] for line in table.splitlines()[2:])))
    assert set(_state.URL_KEYS.values()) - documented == set()


def test_a_checkpoint_card_says_which_files_are_checked(ckpt_dirs, tmp_path, monkeypatch):
    """A card names the files checked against their sha256 on load; one saved before the weights' sum was
    recorded says that its weights are not checked."""
    from geomlab.checkpoints import io as ckpt

    runs, _ = ckpt_dirs
    c = ckpt.load(runs / "s3")
    for name in ("fresh", "older"):
        ckpt.save(tmp_path / "runs" / name, c.model, c.vocab, dict(c.card), layout="folder")
    meta = json.loads((tmp_path / "runs" / "older" / "geomlab.json").read_text())
    del meta["files"]["model.safetensors"]
    (tmp_path / "runs" / "older" / "geomlab.json").write_text(json.dumps(meta))
    monkeypatch.setenv("GEOMLAB_RUNS_DIR", str(tmp_path / "runs"))
    at = goto(app(), "checkpoints")
    assert not at.exception
    lines = [c.value.replace("\\", "") for c in at.caption if c.value.startswith("sha256")]
    assert sorted(lines) == [
        "sha256 checked on load: config.json, vocab.json; the weights are not checked (saved before geomlab "
        "recorded their sha256; `geomlab zoo --accept-weights CHECKPOINT` records it)",
        "sha256 checked on load: model.safetensors, config.json, vocab.json"], lines
