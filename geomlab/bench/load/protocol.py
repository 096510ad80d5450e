"""Streamlit's websocket protocol as the load benchmark speaks it: the ``BackMsg`` that asks for a script run,
the token cursor found in a run's elements and the ``WidgetState`` that moves it, and the ``ForwardMsg``s
folded into one record per script run. The protobuf classes are the installed streamlit package's.

The contract with the app is what a user sees: a slider or select_slider labelled ``"Token cursor"``
(:data:`CURSOR_LABEL`). Source: streamlit's ``BackMsg``/``ForwardMsg`` protobufs; the rest design choice."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

#: The label of the token cursor widget: the one thing the client looks up in the page (the contract).
CURSOR_LABEL = "Token cursor"

#: The values of streamlit's protobuf enums the client reads.
FINISHED_OK = 0           # ForwardMsg.ScriptFinishedStatus.FINISHED_SUCCESSFULLY
FINISHED_COMPILE_ERROR = 1
FINISHED_FRAGMENT_OK = 3  # FINISHED_FRAGMENT_RUN_SUCCESSFULLY
ALERT_ERROR = 1           # Alert.Format.ERROR


def rerun_backmsg(*, query_string: str = "", page_name: str = "", page_script_hash: str = "",
                  widget_states: Iterable[Any] = (), fragment_id: str = "",
                  is_auto_rerun: bool = False) -> bytes:
    """A serialized ``BackMsg`` asking for a script run, as the frontend sends it: the URL query string
    (without ``?``), the page (``page_name`` = its URL path on the first request; ``page_script_hash``
    once the server has named it), the widget states that changed, and for a fragment's run its id
    (``is_auto_rerun`` for the fragment's own ``run_every`` timer)."""
    from streamlit.proto.BackMsg_pb2 import BackMsg

    msg = BackMsg()
    cs = msg.rerun_script
    cs.query_string = query_string
    cs.page_name = page_name
    cs.page_script_hash = page_script_hash
    cs.fragment_id = fragment_id
    cs.is_auto_rerun = is_auto_rerun
    for state in widget_states:
        cs.widget_states.widgets.add().CopyFrom(state)
    return msg.SerializeToString()


#: Name of the app's live chart component (``app_pages/_live_chart.py``; a test checks the two agree).
LIVE_CHART = "geomlab_live_chart"


def is_chart(el: Any) -> bool:
    """Whether an ``Element`` proto is a Plotly chart: ``st.plotly_chart`` or the app's live chart (a
    ``components.v2`` element, ``bidi_component``, named :data:`LIVE_CHART`)."""
    kind = el.WhichOneof("type")
    return kind == "plotly_chart" or (kind == "bidi_component" and el.bidi_component.component_name == LIVE_CHART)


@dataclass
class CursorWidget:
    """The token cursor as found in a run's deltas: widget id, kind (``"select_slider"`` or
    ``"slider"``), its formatted options (select_slider) and its range."""

    id: str
    kind: str
    options: list[str]
    lo: int
    hi: int
    fragment_id: str = ""

    @property
    def n_positions(self) -> int:
        return len(self.options) if self.kind == "select_slider" else self.hi - self.lo + 1


def find_cursor(elements: Iterable[Any], label: str = CURSOR_LABEL,
                fragments: dict[str, str] | None = None) -> CursorWidget | None:
    """The last slider/select_slider element labelled ``label`` among ``Element`` protos, or None;
    ``fragments`` (widget id -> id of the fragment whose delta drew it, :attr:`Run.fragments`) gives its
    ``fragment_id``, which a rerun from that widget must carry, as the frontend's does."""
    from streamlit.proto.Slider_pb2 import Slider

    found = None
    for el in elements:
        if el.WhichOneof("type") != "slider" or el.slider.label != label:
            continue
        s = el.slider
        frag = (fragments or {}).get(s.id, "")
        if s.type == Slider.Type.SELECT_SLIDER:
            found = CursorWidget(s.id, "select_slider", list(s.options), 0, max(len(s.options) - 1, 0), frag)
        else:
            found = CursorWidget(s.id, "slider", [], int(s.min), int(s.max), frag)
    return found


def cursor_state(widget: CursorWidget, index: int) -> Any:
    """The ``WidgetState`` that sets the cursor to position ``index`` (0-based, clamped to the widget):
    a select_slider sends its formatted option as ``string_array_value``, a slider its number as
    ``double_array_value`` (what the frontend sends for each)."""
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    st = WidgetState()
    st.id = widget.id
    if widget.kind == "select_slider":
        i = max(0, min(int(index), len(widget.options) - 1))
        st.string_array_value.data[:] = [widget.options[i]]
    else:
        st.double_array_value.data[:] = [float(max(widget.lo, min(int(index) + widget.lo, widget.hi)))]
    return st


def move_targets(n_positions: int, moves: int) -> list[int]:
    """Cursor positions for ``moves`` moves over a text of ``n_positions`` tokens, spread evenly and each
    different from the one before (the cursor starts at 0); empty when there is nowhere to move."""
    if n_positions < 2 or moves < 1:
        return []
    out, prev = [], 0
    for k in range(moves):
        t = max(1, min(n_positions - 1, round((k + 1) * (n_positions - 1) / moves)))
        if t == prev:
            t = prev - 1 if prev > 0 else 1
        out.append(t)
        prev = t
    return out


def element_errors(el: Any) -> str | None:
    """The message of an error shown in the page (``st.error`` alert or an exception element), else None."""
    kind = el.WhichOneof("type")
    if kind == "alert" and el.alert.format == ALERT_ERROR:
        return el.alert.body.strip()
    if kind == "exception" and not el.exception.is_warning:
        return f"{el.exception.type}: {el.exception.message}".strip()
    return None


@dataclass
class Run:
    """What one script run sent: its ``script_finished`` status, Plotly charts, errors shown, every new
    element (``Element`` protos, in order), bytes and messages."""

    status: int | None = None
    charts: int = 0
    errors: list[str] = field(default_factory=list)
    elements: list[Any] = field(default_factory=list)
    fragments: dict[str, str] = field(default_factory=dict)
    nbytes: int = 0
    messages: int = 0

    @property
    def finished_ok(self) -> bool:
        return self.status in (FINISHED_OK, FINISHED_FRAGMENT_OK)

    def absorb(self, later: "Run") -> "Run":
        """This run followed by ``later`` (e.g. a fragment's runs filling in a view): counts and lists
        added, the status of the later one."""
        self.status = later.status
        self.charts += later.charts
        self.errors += later.errors
        self.elements += later.elements
        self.fragments.update(later.fragments)
        self.nbytes += later.nbytes
        self.messages += later.messages
        return self


class RunReader:
    """Folds ``ForwardMsg``s into :class:`Run` records: a run starts at ``new_session`` and ends at
    ``script_finished``. Also tracks what the browser would keep between runs: the page's script hash,
    the URL query string the app wrote (``page_info_changed``) and the fragments that asked to be rerun
    on a timer (``auto_rerun``: fragment id -> interval in seconds)."""

    def __init__(self) -> None:
        self.current = Run()
        self.page_script_hash = ""
        self.query_string = ""
        self.total_bytes = 0
        self.auto_reruns: dict[str, float] = {}

    def feed(self, data: bytes) -> Run | None:
        """Parse one websocket frame; return the finished :class:`Run` when this frame ended one."""
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        msg = ForwardMsg()
        msg.ParseFromString(data)
        self.total_bytes += len(data)
        kind = msg.WhichOneof("type")
        if kind == "new_session":
            self.current = Run()
            if msg.new_session.page_script_hash:
                self.page_script_hash = msg.new_session.page_script_hash
        run = self.current
        run.nbytes += len(data)
        run.messages += 1
        if kind == "navigation" and msg.navigation.page_script_hash:
            self.page_script_hash = msg.navigation.page_script_hash
        elif kind == "page_info_changed":
            self.query_string = msg.page_info_changed.query_string
        elif kind == "auto_rerun":
            self.auto_reruns[msg.auto_rerun.fragment_id] = max(0.05, float(msg.auto_rerun.interval))
        elif kind == "stop_auto_rerun":
            for fid in msg.stop_auto_rerun.fragment_ids:
                self.auto_reruns.pop(fid, None)
        elif kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
            el = msg.delta.new_element
            run.elements.append(el)
            if el.WhichOneof("type") == "slider" and msg.delta.fragment_id:
                run.fragments[el.slider.id] = msg.delta.fragment_id
            if is_chart(el):
                run.charts += 1
            err = element_errors(el)
            if err:
                run.errors.append(err)
        elif kind == "script_finished":
            run.status = int(msg.script_finished)
            self.current = Run()
            return run
        return None


