"""The load benchmark's room mode (geomlab.bench.load.room): the token cursor as a browser holds it across
runs, a Tour step's heading, the arguments it refuses, and a small class on one server."""

from __future__ import annotations

import pytest

from geomlab.bench.load import room
from geomlab.bench.load.protocol import Run
from test_load_bench import _element, _select_slider


def slider(value: str | None = None):
    el = _select_slider("Token cursor", ["0 · a", "1 · b", "2 · c"])
    if value is not None:
        el.slider.raw_value[:] = [value]
        el.slider.set_value = True
    return el


def test_the_cursor_is_the_servers_value_else_the_browsers():
    assert room.cursor_after(Run(elements=[slider()]), None) == 0  # first drawn: its default
    assert room.cursor_after(Run(elements=[slider("2 · c")]), 0) == 2  # set by the server
    assert room.cursor_after(Run(elements=[slider()]), 2) == 2  # redrawn unchanged: the browser keeps 2
    assert room.cursor_after(Run(elements=[]), 1) == 1  # a fragment run without the cursor


def test_a_step_is_recognised_by_its_heading():
    run = Run(elements=[_element("heading", body="2. O(5)'s spectrum", tag="h3")])
    assert room.shows_step(run, 2) and not room.shows_step(run, 1) and not room.shows_step(Run(), 2)
    # the Tour's title line over its figures is markdown (a heading and the narrow window's note)
    line = Run(elements=[_element("markdown", body="### 3. Back to the identity <span class='gl-tour-note'>…</span>")])
    assert room.shows_step(line, 3) and not room.shows_step(line, 2)
    assert not room.shows_step(Run(elements=[_element("markdown", body="3. a list item")]), 3)


def test_bad_room_arguments_are_refused():
    with pytest.raises(ValueError, match="replicas 1 or 2"):
        room.run_room(3, replicas=3)
    with pytest.raises(ValueError, match="N >= 1"):
        room.run_room(0)


@pytest.mark.slow
def test_three_students_follow_a_teacher_on_one_server():
    r = room.run_room(3, 1, moves=1, steps=1, timeout=300)
    assert r.ok, room.room_report(r)
    assert len(r.join_s) == len(r.cursor_s) == len(r.step_s) == len(r.page_s) == 3
    assert all(0 < x < 30 for x in r.cursor_s + r.step_s + r.page_s)
    # the students' charts followed through the channel, before their sessions' catch-up runs
    assert max(r.cursor_s) < min(r.page_s)
