"""Typed model configs: one frozen dataclass per model kind, validated on construction.

Each kind's config class (``TransformerConfig``, ``OSMRNNConfig``, ...) lists its keys as fields: the type, the
default and a short comment are the documentation. Values are checked against the field types (an ``int``
field takes integers, not ``True``; a ``float`` field any real number; a ``Literal`` field one of its
values; ``X | None`` also ``None``) and then against the kind's own rules (:meth:`ConfigBase.validate`), each
failure one ``ValueError`` line (or the kind's subclass of it) that names the key.

Checkpoints store the plain dict (:meth:`ConfigBase.to_dict`: ``kind``, ``vocab_size`` and every field, values
exactly as given); :meth:`ConfigBase.from_dict` reads it back, filling keys an older checkpoint lacks with
today's defaults. Design choice (the shape follows nanoGPT's ``GPTConfig``).
"""

from __future__ import annotations

import dataclasses
import functools
import numbers
import types
import typing
from typing import Any, ClassVar, Literal, Mapping

__all__ = ["ConfigBase"]


def _describe(hint) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Literal:
        return f"one of {args}"
    if origin in (typing.Union, types.UnionType):
        return " or ".join("null" if a is type(None) else _describe(a) for a in args)
    if origin in (list, tuple):
        return f"a list of {_describe(args[0])}s"
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(hint, str(hint))


def _fits(hint, value) -> bool:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Literal:
        return any(type(value) is type(a) and value == a for a in args)
    if origin in (typing.Union, types.UnionType):
        return any(value is None if a is type(None) else _fits(a, value) for a in args)
    if origin in (list, tuple):
        return isinstance(value, (list, tuple)) and all(_fits(args[0], v) for v in value)
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    return isinstance(value, hint)


@functools.cache
def _field_types(cls) -> dict[str, Any]:
    return typing.get_type_hints(cls)


@functools.cache
def _field_names(cls) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


@dataclasses.dataclass(frozen=True, kw_only=True)
class ConfigBase:
    """Base of every typed config: checks the field types, then :meth:`validate`.

    Subclasses are ``@dataclass(frozen=True, kw_only=True)``, set ``kind`` (the registry name, empty for a
    config that is part of a model, like the CEM stack's) and ``error`` (the ``ValueError`` subclass raised).
    """

    kind: ClassVar[str] = ""
    error: ClassVar[type[ValueError]] = ValueError
    #: Why a key people expect is not one of this kind's (shown when a config names it): key -> reason.
    absent: ClassVar[dict[str, str]] = {"group": "only OSM models (osm-rnn, osmformer) have a matrix group"}

    def __post_init__(self) -> None:
        type(self).check_types({f.name: getattr(self, f.name) for f in dataclasses.fields(self)})
        self.validate()

    @classmethod
    def check_types(cls, config: Mapping[str, Any]) -> None:
        """Raise :attr:`error` naming the first key of ``config`` that is a field of this config and whose
        value does not fit the field's type (e.g. ``lstm: hidden must be an integer, got 'abc'``); other keys
        (``kind``, unknown ones) are left to :meth:`from_dict`. Used on construction, and by the command line
        on ``--config`` before a budget search fills in the rest."""
        hints = _field_types(cls)
        for key, value in config.items():
            if key in _field_names(cls) and not _fits(hints[key], value):
                raise cls.error(f"{cls.kind or cls.__name__}: {key} must be {_describe(hints[key])}, got {value!r}")

    def validate(self) -> None:
        """The kind's rules beyond the field types; raises :attr:`error` naming the key."""

    def fail(self, message: str) -> typing.NoReturn:
        """Raise :attr:`error` with ``message``, prefixed by the kind."""
        raise self.error(f"{self.kind or type(self).__name__}: {message}")

    def positive(self, *keys: str) -> None:
        """Raise unless every field in ``keys`` is at least 1."""
        for key in keys:
            if getattr(self, key) < 1:
                self.fail(f"{key} must be a positive integer, got {getattr(self, key)!r}")

    def fraction(self, key: str) -> None:
        """Raise unless the field ``key`` lies in [0, 1) (a dropout probability)."""
        if not 0.0 <= getattr(self, key) < 1.0:
            self.fail(f"{key} must be in [0, 1), got {getattr(self, key)!r}")

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Every key with a default and its default (``vocab_size`` has none)."""
        out = {}
        for f in dataclasses.fields(cls):
            if f.default is not dataclasses.MISSING:
                out[f.name] = f.default
            elif f.default_factory is not dataclasses.MISSING:
                out[f.name] = f.default_factory()
        return out

    @classmethod
    def check_keys(cls, config: Mapping[str, Any]) -> None:
        """Raise :attr:`error` when ``config`` names another kind or a key this config does not have."""
        names = [f.name for f in dataclasses.fields(cls)]
        if "kind" in config and cls.kind and config["kind"] != cls.kind:
            raise cls.error(f"a {config['kind']!r} config is not a {cls.kind!r} config")
        unknown = set(config) - set(names) - {"kind"}
        if unknown:
            known = sorted(names + (["kind"] if cls.kind else []))
            why = "".join(f" ({k}: {cls.absent[k]})" for k in sorted(unknown) if k in cls.absent)
            raise cls.error(f"unknown config keys for {cls.kind or cls.__name__!r}: {sorted(unknown)}{why}; "
                            f"known: {known}")

    @classmethod
    def from_dict(cls, config: Mapping[str, Any]) -> ConfigBase:
        """The config of a plain dict (a checkpoint's ``model_config``, a CLI ``--config``, a budget search's
        candidate): ``kind`` may be present and must match; missing keys take the defaults. Raises
        :attr:`error` for a wrong kind, an unknown or missing key, or an invalid value."""
        cls.check_keys(config)
        names = [f.name for f in dataclasses.fields(cls)]
        defaults = cls.defaults()
        missing = [n for n in names if n not in config and n not in defaults]
        if missing:
            raise cls.error(f"{cls.kind or cls.__name__} config needs {', '.join(repr(n) for n in missing)}")
        return cls(**{k: v for k, v in config.items() if k != "kind"})

    @classmethod
    def coerce(cls, config: ConfigBase | Mapping[str, Any]) -> ConfigBase:
        """``config`` itself when it is a ``cls``, else :meth:`from_dict` of it."""
        return config if isinstance(config, cls) else cls.from_dict(config)

    def to_dict(self) -> dict[str, Any]:
        """The plain JSON-ready dict checkpoints store: ``kind`` and ``vocab_size`` first (when the config has
        them), then the fields in declaration order, values as given (lists for list fields)."""
        body = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        body = {k: list(v) if isinstance(v, (list, tuple)) else v for k, v in body.items()}
        head = {"kind": self.kind} if self.kind else {}
        if "vocab_size" in body:
            head["vocab_size"] = body.pop("vocab_size")
        return {**head, **body}
