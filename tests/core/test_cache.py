"""geomlab.core.cache.ByteLRU: the byte budget holds, least recently used goes first, oversized values are returned
but not kept, concurrent callers of one key compute it once, and sizes are measured sensibly."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from geomlab.core import cache
from geomlab.core.cache import ByteLRU


def test_budget_from_env(monkeypatch):
    monkeypatch.delenv(cache.ENV_BUDGET, raising=False)
    assert cache.budget_from_env() == 512_000_000
    monkeypatch.setenv(cache.ENV_BUDGET, "64")
    assert cache.budget_from_env() == 64_000_000
    assert ByteLRU().budget == 64_000_000
    monkeypatch.setenv(cache.ENV_BUDGET, "lots")
    with pytest.raises(ValueError, match="GEOMLAB_CACHE_MB"):
        cache.budget_from_env()
    monkeypatch.setenv(cache.ENV_BUDGET, "-1")
    with pytest.raises(ValueError, match="0 or more"):
        cache.budget_from_env()


@given(ops=st.lists(st.tuples(st.integers(0, 12), st.integers(0, 140)), max_size=80),
       budget=st.integers(0, 300))
def test_budget_is_never_exceeded_and_lookups_are_counted(ops, budget):
    c = ByteLRU(budget, sizeof=len)
    lookups = 0
    for key, size in ops:
        kept = c.put(key, b"x" * size)
        assert kept == (size <= budget)
        assert c.nbytes <= budget
        assert c.nbytes == sum(len(c.get(k)) for k in c.keys())
        lookups += len(c)
        if kept:
            assert c.keys()[-1] == key  # just stored: most recent
        else:
            assert key not in c
    s = c.stats()
    assert s.hits + s.misses == lookups and s.nbytes <= budget and s.entries == len(c)


def test_least_recently_used_is_evicted_first():
    c = ByteLRU(30, sizeof=len)
    for k in "abc":
        c.put(k, b"0123456789")
    assert c.get("a") == b"0123456789"  # a is now the most recent: b goes first
    c.put("d", b"0123456789")
    assert c.keys() == ["c", "a", "d"] and "b" not in c
    c.put("e", b"01234567890123456789")  # needs two slots: c and a go
    assert c.keys() == ["d", "e"]
    assert c.stats().evictions == 3


def test_a_value_larger_than_the_budget_is_returned_but_not_kept():
    c = ByteLRU(10, sizeof=len)
    c.put("small", b"123")
    big = b"x" * 11
    assert c.get_or_compute("big", lambda: big) is big
    assert "big" not in c and "small" in c and c.nbytes == 3
    assert c.stats().evictions == 1
    assert ByteLRU(0, sizeof=len).get_or_compute("k", lambda: b"v") == b"v"


def test_replacing_a_key_recounts_its_bytes():
    c = ByteLRU(100, sizeof=len)
    c.put("k", b"x" * 60)
    c.put("k", b"x" * 10)
    assert c.nbytes == 10 and len(c) == 1


def test_concurrent_requests_for_one_key_compute_once():
    c = ByteLRU(1_000_000, sizeof=lambda v: 8)
    calls = []
    start = threading.Barrier(8)

    def compute():
        calls.append(1)
        time.sleep(0.2)
        return object()

    results = []

    def worker():
        start.wait()
        results.append(c.get_or_compute("same", compute))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert len({id(r) for r in results}) == 1
    s = c.stats()
    assert s.misses == 1 and s.hits == 7


def test_threads_hammering_many_keys_keep_the_books_straight():
    c = ByteLRU(2_000, sizeof=len)
    errors = []

    def worker(seed):
        rng = np.random.default_rng(seed)
        try:
            for _ in range(400):
                k = int(rng.integers(0, 40))
                v = c.get_or_compute(k, lambda k=k: b"x" * (10 + 7 * k))
                assert len(v) == 10 + 7 * k
                assert c.nbytes <= c.budget
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert c.nbytes == sum(10 + 7 * k for k in c.keys()) <= 2_000
    s = c.stats()
    assert s.hits + s.misses == 8 * 400


def test_a_failing_compute_stores_nothing_and_the_next_caller_retries():
    c = ByteLRU(100, sizeof=len)

    def boom():
        raise RuntimeError("no")

    with pytest.raises(RuntimeError):
        c.get_or_compute("k", boom)
    assert "k" not in c
    assert c.get_or_compute("k", lambda: b"ok") == b"ok"


def test_sizes_of_traces_figures_and_arrays():
    import plotly.graph_objects as go

    from geomlab.trace import from_record

    tr = from_record({"logits": np.zeros((5, 3), np.float32)}, "newkind", np.arange(5))
    assert cache.size_of(tr) == 5 * 3 * 4 + 5 * 8 + 5 * 2  # logits, tokens, labels '#0'..'#4'


    class WithNbytes:
        nbytes = 1234

        def array_fields(self):
            return {}

    assert cache.size_of(WithNbytes()) == 1234
    fig = go.Figure(go.Heatmap(z=np.random.rand(100, 100)))
    est, real = cache.figure_nbytes(fig), len(fig.to_json())
    assert real / 3 < est < 3 * real
    from geomlab.figures import Chart

    assert cache.size_of(Chart(fig, "caption")) >= est
    assert cache.size_of(np.zeros(10)) == 80 and cache.size_of("abc") == 3
    assert cache.size_of(object()) == cache.UNKNOWN_NBYTES


def test_stats_line_reads_as_a_caption():
    c = ByteLRU(1_000_000, sizeof=len)
    c.get("x")
    c.put("x", b"abc")
    c.get("x")
    line = c.stats().line()
    assert line.startswith("cache: 1 entries") and "hit rate 50%" in line and "1 hits, 1 misses" in line


def test_shared_cache_is_one_instance():
    assert cache.shared_cache() is cache.shared_cache()


def test_remeasure_charges_a_grown_value_and_keeps_the_budget():
    c = ByteLRU(100, sizeof=len)
    c.put("old", [0] * 30)
    grow = [0] * 30
    c.put("k", grow)
    grow.extend([0] * 50)  # the value grew in place (as a trace memoising geometry does)
    assert c.remeasure("k") == 80
    assert c.nbytes == 80 <= c.budget and c.keys() == ["k"]  # "old" evicted to make room
    assert c.remeasure("missing") is None


def test_a_trace_is_charged_for_the_geometry_memoised_on_it():
    from geomlab.trace import from_record

    tr = from_record({"logits": np.zeros((5, 3), np.float32)}, "newkind", np.arange(5))
    base = cache.size_of(tr)
    tr.__dict__["_view_cache"] = {("eig",): (np.zeros(100), np.zeros((2, 2)))}
    assert cache.size_of(tr) == base + 800 + 32


def test_a_cache_miss_logs_the_length_of_a_visitors_text_not_the_text(caplog):
    """The app's trace keys hold the visitor's text; the log of a miss printed its first ~80 characters."""
    import logging

    from app_pages import _data

    key = _data.trace_key("runs/a", 1.0, "my private note, typed into the app", {"steps": 2})
    assert key == ("trace", "runs/a", 1.0, "my private note, typed into the app", (("steps", 2),))
    assert hash(key) == hash(("trace", "runs/a", 1.0, "my private note, typed into the app", (("steps", 2),)))
    lru = ByteLRU(10_000, sizeof=lambda v: 64, name="t")
    with caplog.at_level(logging.INFO, logger="geomlab.core.cache"):
        assert lru.get_or_compute(key, lambda: np.zeros(4)).shape == (4,)
    assert "private" not in caplog.text and "<text of 35 characters>" in caplog.text, caplog.text
    assert lru.get_or_compute(("trace", "runs/a", 1.0, "my private note, typed into the app", (("steps", 2),)),
                              lambda: None) is not None  # the plain string finds the same entry


def test_identity_memo_makes_once_per_object_and_key_and_forgets_a_collected_object():
    import gc

    import plotly.graph_objects as go

    from geomlab.core.cache import IdentityMemo

    memo, made = IdentityMemo(), []

    def make(tag):
        made.append(tag)
        return tag

    a, b = go.Figure(), go.Figure()  # unhashable, and equal to each other
    assert memo.get(a, 1, lambda: make("a1")) == "a1" and memo.get(a, 1, lambda: make("again")) == "a1"
    assert memo.get(a, 2, lambda: make("a2")) == "a2" and memo.get(b, 1, lambda: make("b1")) == "b1"
    assert made == ["a1", "a2", "b1"] and len(memo) == 2
    del a
    gc.collect()
    assert len(memo) == 1  # the entry went with its object
    c = go.Figure()  # (may reuse a's address: its value is made anew, never a's)
    assert memo.get(c, 1, lambda: make("c1")) == "c1"


def test_identity_memo_keeps_the_objects_used_last_only():
    import plotly.graph_objects as go

    from geomlab.core.cache import IdentityMemo

    memo, made = IdentityMemo(max_objects=3), []
    figs = [go.Figure() for _ in range(5)]
    for i, f in enumerate(figs):
        memo.get(f, "k", lambda i=i: made.append(i) or i)
    assert len(memo) == 3
    memo.get(figs[4], "k", lambda: made.append("again"))  # among the last three: kept
    memo.get(figs[0], "k", lambda: made.append("again0") or 0)  # pushed out: made anew
    assert made == [0, 1, 2, 3, 4, "again0"]
