"""A room's shared state and the values that enter a room, each checked against a cap: the errors
(:class:`RoomError`, :class:`RoomsUnavailable`), the join code and the teacher token, :class:`RoomState` (what
the students follow), the client id of a student and the answer to a question.

Every value that a browser can send is checked here before a store keeps it (type, length, count), so a
hostile client can store at most a few kilobytes per room (design choice: the caps below).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import types
from dataclasses import dataclass, field, fields, replace
from typing import Any, Mapping

#: Crockford's base-32 alphabet: digits and capitals without I, L, O and U (no 0/O or 1/I/L confusion).
CODE_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
#: Characters of a join code: 8 from 32 symbols, 40 bits (about 1.1e12 codes) drawn by :mod:`secrets`.
CODE_LENGTH = 8
CODE_BITS = CODE_LENGTH * 5
#: Caps on what a room keeps (design choice: far above what a lesson needs, far below a megabyte).
MAX_TEXT = 2048          # characters of the text (the trace's own limit, geomlab.trace.MAX_TEXT_CHARS)
MAX_REF = 200            # characters of a checkpoint ref
MAX_SLUG = 64            # characters of a page, view or lesson slug
MAX_CONTROLS = 32        # entries of the controls dict
MAX_CONTROL_VALUE = 200  # characters of a string control value
MAX_POSITION = 100_000   # cursor, step index and answer values: 0..MAX_POSITION
MAX_REVEALED = 64        # questions revealed in one room
MAX_CLIENTS = 500        # students present in one room, and answers to one question

_SLUG = re.compile(r"[a-z0-9][a-z0-9_-]*\Z")
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_CLIENT = re.compile(r"[A-Za-z0-9_-]{8,64}\Z")
_CONTROL_TYPES = (str, int, float, bool, type(None))
MODES = ("follow", "explore")


class RoomError(ValueError):
    """A request a room refuses: an unknown or expired code, a wrong teacher token, a value over a cap."""


class RoomsUnavailable(RuntimeError):
    """The rooms store cannot be reached (the Redis connection is lost); one line naming the store."""


def new_code() -> str:
    """A fresh join code: :data:`CODE_LENGTH` characters of :data:`CODE_ALPHABET` from :mod:`secrets`
    (:data:`CODE_BITS` = 40 bits). Source: design choice; the alphabet is Crockford's base 32."""
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


def normalise_code(text: Any) -> str:
    """The join code a student typed, as stored: upper case, spaces and hyphens dropped, O read as 0 and I, L
    as 1 (Crockford's decoding). Raises :class:`RoomError` when it is not a well-formed code."""
    if not isinstance(text, str) or len(text) > 4 * CODE_LENGTH:
        raise RoomError("a room code is 8 letters and digits")
    code = text.strip().upper().replace("-", "").replace(" ", "")
    code = code.translate(str.maketrans("OIL", "011"))
    if len(code) != CODE_LENGTH or any(c not in CODE_ALPHABET for c in code):
        raise RoomError(f"{text[:20]!r} is not a room code (8 letters and digits)")
    return code


def new_token() -> str:
    """A teacher token: ``secrets.token_urlsafe(32)`` (256 bits). Only its digest is stored."""
    return secrets.token_urlsafe(32)


def token_digest(token: Any) -> str:
    """The SHA-256 hex digest a store keeps instead of the token (a wrong type digests to an empty string's)."""
    raw = token.encode("utf-8", "replace") if isinstance(token, str) and len(token) <= 200 else b""
    return hashlib.sha256(raw).hexdigest()


def check_token(token: Any, digest: str) -> None:
    """Raise :class:`RoomError` unless ``token`` digests to ``digest`` (constant-time comparison,
    :func:`hmac.compare_digest`)."""
    if not (isinstance(token, str) and token and hmac.compare_digest(token_digest(token), digest)):
        raise RoomError("only the teacher can drive this room (wrong teacher token)")


def check_client(client_id: Any) -> str:
    """A well-formed client id (8-64 URL-safe characters); else :class:`RoomError`. Whether a room gave it out
    is :func:`check_member`'s question."""
    if not isinstance(client_id, str) or not _CLIENT.match(client_id):
        raise RoomError("a client id is 8-64 letters, digits, '-' or '_'")
    return client_id


#: Characters of a client id's nonce and of its signature (96 bits each).
_NONCE, _SIG = 16, 16


def client_id_for(code: str, digest: str, nonce: str | None = None) -> str:
    """A student's client id in room ``code``: a nonce (``secrets.token_urlsafe(12)``, 16 characters, unless
    given) followed by its signature, the first 16 URL-safe base-64 characters of the HMAC-SHA256 of
    ``code:nonce`` keyed by the room's teacher-token ``digest`` (which never leaves the store). 32 characters.
    Only the room can give one out, so made-up ids neither count as present nor answer. Source: design
    choice (HMAC, RFC 2104)."""
    import base64

    nonce = secrets.token_urlsafe(12) if nonce is None else nonce
    mac = hmac.new(digest.encode(), f"{code}:{nonce}".encode(), hashlib.sha256).digest()
    return nonce + base64.urlsafe_b64encode(mac).decode()[:_SIG]


def check_member(code: str, digest: str, client_id: Any) -> str:
    """``client_id`` when room ``code`` (teacher-token ``digest``) gave it out (:func:`client_id_for`;
    constant-time comparison); else :class:`RoomError`."""
    check_client(client_id)
    if len(client_id) != _NONCE + _SIG or not hmac.compare_digest(
            client_id_for(code, digest, client_id[:_NONCE]), client_id):
        raise RoomError("not a client id of this room: join it from its code or link")
    return client_id


def check_mode(mode: Any) -> str:
    """``"follow"`` or ``"explore"``; else :class:`RoomError`."""
    if mode not in MODES:
        raise RoomError(f"mode must be 'follow' or 'explore', not {str(mode)[:20]!r}")
    return mode


def check_position(value: Any, name: str) -> int:
    """An int in 0..:data:`MAX_POSITION` (bool refused); else :class:`RoomError` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_POSITION:
        raise RoomError(f"{name} must be a whole number in 0..{MAX_POSITION}, not {str(value)[:20]!r}")
    return value


def question_key(lesson: str, step: int) -> str:
    """The key of a Tour step's question in a room: ``"LESSON/STEP"`` (step 0-based)."""
    return f"{_slug(lesson, 'lesson')}/{check_position(step, 'step')}"


def _slug(value: Any, name: str, empty: bool = False) -> str:
    if value == "" and empty:
        return value
    if not isinstance(value, str) or len(value) > MAX_SLUG or not _SLUG.match(value):
        raise RoomError(f"{name} must be a slug of at most {MAX_SLUG} lower-case letters, digits, '-' or '_'")
    return value


def _text(value: Any, name: str, cap: int) -> str:
    if not isinstance(value, str) or len(value) > cap:
        raise RoomError(f"{name} must be a string of at most {cap} characters")
    if any(ord(c) < 32 and c not in "\n\t" for c in value):
        raise RoomError(f"{name} holds control characters")
    return value


def _controls(value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping) or len(value) > MAX_CONTROLS:
        raise RoomError(f"controls must be a dict of at most {MAX_CONTROLS} entries")
    out = {}
    for key, v in value.items():
        if not isinstance(key, str) or len(key) > MAX_SLUG or not _KEY.match(key):
            raise RoomError(f"control name {str(key)[:20]!r} is not an identifier of at most {MAX_SLUG} characters")
        if not isinstance(v, _CONTROL_TYPES) or (isinstance(v, float) and v != v):
            raise RoomError(f"control {key!r} must be a string, number, true/false or null")
        if isinstance(v, str):
            _text(v, f"control {key!r}", MAX_CONTROL_VALUE)
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) > 10**9:
            raise RoomError(f"control {key!r} is out of range")
        out[key] = v
    return types.MappingProxyType(out)


@dataclass(frozen=True)
class RoomState:
    """What the students of a room follow; every field is checked on construction (:class:`RoomError`).

    Attributes:
        page: slug of the app page the teacher shows (``""``: none yet).
        checkpoint: catalog ref of the checkpoint (``bundled/NAME``, ``runs/NAME``), at most 200 characters.
        text: the text the checkpoint reads, at most :data:`MAX_TEXT` characters.
        cursor: 0-based token position.
        view: slug of the view (``trajectories``, ``attention``, ...; ``""``: the page's default).
        controls: the page's other choices, ``{identifier: str | int | float | bool | None}``, at most
            :data:`MAX_CONTROLS` entries (a second checkpoint, layer, head, T, ...); read-only, and an update
            replaces the whole dict.
        lesson: slug of the Tour lesson (``""``: not on the Tour); step: its 0-based step index.
        revealed: question keys (:func:`question_key`) whose answer the teacher has revealed.
        version: raised by one at every change the teacher makes; a follower redraws when it moves.
    """

    page: str = ""
    checkpoint: str = ""
    text: str = ""
    cursor: int = 0
    view: str = ""
    controls: Mapping[str, Any] = field(default_factory=dict)
    lesson: str = ""
    step: int = 0
    revealed: tuple[str, ...] = ()
    version: int = 0

    def __post_init__(self):
        _slug(self.page, "page", empty=True)
        _slug(self.view, "view", empty=True)
        _slug(self.lesson, "lesson", empty=True)
        _text(self.checkpoint, "checkpoint", MAX_REF)
        _text(self.text, "text", MAX_TEXT)
        check_position(self.cursor, "cursor")
        check_position(self.step, "step")
        object.__setattr__(self, "controls", _controls(self.controls))
        if not isinstance(self.revealed, (tuple, list)) or len(self.revealed) > MAX_REVEALED:
            raise RoomError(f"revealed must be a list of at most {MAX_REVEALED} question keys")
        for key in self.revealed:
            lesson, _, step = str(key).partition("/")
            if not step.isdigit() or question_key(lesson, int(step)) != key:
                raise RoomError(f"{str(key)[:40]!r} is not a question key LESSON/STEP")
        object.__setattr__(self, "revealed", tuple(dict.fromkeys(self.revealed)))
        if isinstance(self.version, bool) or not isinstance(self.version, int) or self.version < 0:
            raise RoomError("version must be a whole number >= 0")

    def changed(self, changes: Mapping[str, Any]) -> "RoomState":
        """This state with ``changes`` applied (unknown names and ``version`` refused) and the version raised
        by one; raises :class:`RoomError` on a bad value."""
        names = {f.name for f in fields(self)} - {"version"}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise RoomError(f"a room has no setting {unknown[0][:40]!r} (settings: {', '.join(sorted(names))})")
        return replace(self, **dict(changes), version=self.version + 1)

    def is_revealed(self, lesson: str, step: int) -> bool:
        """Whether the teacher revealed the answer of ``lesson``'s step ``step`` (0-based)."""
        return question_key(lesson, step) in self.revealed

    def to_json(self) -> str:
        """The state as compact JSON (what a store keeps; at most a few kilobytes by the caps)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data.update(controls=dict(self.controls), revealed=list(self.revealed))
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> "RoomState":
        """The state :meth:`to_json` wrote; :class:`RoomError` when it is not one."""
        try:
            data = json.loads(text)
            return cls(**data | {"revealed": tuple(data.get("revealed", ()))})
        except (ValueError, TypeError) as exc:
            raise RoomError(f"stored room state is unreadable: {str(exc)[:80]}") from None


@dataclass(frozen=True)
class Presence:
    """How many students of a room were seen within the presence window, by mode."""

    follow: int = 0
    explore: int = 0

    @property
    def total(self) -> int:
        """Students present, following or exploring."""
        return self.follow + self.explore


@dataclass(frozen=True)
class Tally:
    """The answers to one question: ``counts`` {answer: number of students}, ``total`` students who answered,
    ``revealed`` whether the teacher revealed the answer."""

    counts: Mapping[int, int]
    total: int
    revealed: bool


def tally_of(answers: Mapping[Any, Any], revealed: bool) -> Tally:
    """A :class:`Tally` from ``{client id: answer}`` (answers as ints or their decimal strings)."""
    counts: dict[int, int] = {}
    for value in answers.values():
        counts[int(value)] = counts.get(int(value), 0) + 1
    return Tally(dict(sorted(counts.items())), sum(counts.values()), revealed)
