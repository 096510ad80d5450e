"""A sweep's search space: the searched keys (:class:`Dimension`), their text form (:func:`parse_search`), the
checks against a model kind (:func:`check_space`) and the optima at an edge of their range (:func:`edges`).

* **Search space** (:func:`parse_search`): ``KEY=log:LOW:HIGH`` (log-uniform), ``KEY=float:LOW:HIGH``,
  ``KEY=int:LOW:HIGH`` (both ends included) or ``KEY=choice:A,B,C``; ``KEY`` is a training key
  (:data:`TRAIN_KEYS`) or ``config.NAME`` for a model config key.
* **Edges** (:func:`edges`): when the best value of a numeric searched key lies at an edge of its range
  (continuous: in the outer tenth, on the sampled scale; choices: the smallest or largest), the optimum may
  lie outside the range; the summary says so.

Sources: Optuna (Akiba et al., KDD 2019: the ``suggest_*`` distributions); everything else here is a design
choice.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from geomlab.core.argv import finite_float
from geomlab.core.jsonread import JSONInputError, parse_json

#: Training keys a sweep may search (fields of :class:`geomlab.training.trainer.TrainConfig`). The seed is the sweep's
#: own (``seeds``); evaluation settings (``eval_*``) and the device do not change what is trained.
TRAIN_KEYS: tuple[str, ...] = ("lr", "weight_decay", "warmup", "min_lr_ratio", "grad_clip", "batch_size", "steps",
                               "seq_len")

#: The default search space of ``python -m geomlab sweep``: the peak learning rate, log-uniform.
DEFAULT_SEARCH: tuple[str, ...] = ("lr=log:1e-4:1e-1",)

#: Outer fraction of a continuous range (on its sampled scale) that counts as "at the edge".
EDGE_FRACTION = 0.1

_KINDS = ("log", "float", "int", "choice")
_SPEC_HELP = ("KEY=log:LOW:HIGH, KEY=float:LOW:HIGH, KEY=int:LOW:HIGH or KEY=choice:A,B,... (KEY a training "
              f"key ({', '.join(TRAIN_KEYS)}) or config.NAME for a model config key)")


class SweepError(ValueError):
    """A bad sweep request: a malformed search spec, an unknown key, a study made with another setup."""


@dataclass(frozen=True)
class Dimension:
    """One searched key.

    key: a training key (``"lr"``) or ``"config.NAME"`` (a model config key). kind: ``"log"`` (log-uniform
    on ``[low, high]``), ``"float"`` (uniform), ``"int"`` (integers ``low..high``) or ``"choice"``
    (``choices``, categorical; numbers or strings).
    """

    key: str
    kind: str
    low: float | None = None
    high: float | None = None
    choices: tuple[Any, ...] = ()

    @property
    def target(self) -> str:
        """``"model"`` for ``config.NAME`` keys, else ``"train"``."""
        return "model" if self.key.startswith("config.") else "train"

    @property
    def name(self) -> str:
        """The key inside its target: ``"tau"`` for ``"config.tau"``, ``"lr"`` for ``"lr"``."""
        return self.key.split(".", 1)[1] if self.target == "model" else self.key

    def spec(self) -> str:
        """The text form, ``"lr=log:0.0001:0.1"`` (what :func:`parse_search` reads back)."""
        if self.kind == "choice":
            return f"{self.key}=choice:" + ",".join(json.dumps(c) if isinstance(c, str) else str(c)
                                                     for c in self.choices)
        return f"{self.key}={self.kind}:{_num(self.low)}:{_num(self.high)}"

    def suggest(self, trial) -> Any:
        """The value of this key for Optuna ``trial`` (``suggest_float`` / ``suggest_int`` /
        ``suggest_categorical``)."""
        if self.kind == "log":
            return trial.suggest_float(self.key, self.low, self.high, log=True)
        if self.kind == "float":
            return trial.suggest_float(self.key, self.low, self.high)
        if self.kind == "int":
            return trial.suggest_int(self.key, int(self.low), int(self.high))
        return trial.suggest_categorical(self.key, list(self.choices))

    def edge(self, value: Any) -> str | None:
        """``"low"`` or ``"high"`` when ``value`` lies at that edge of the range (see module docstring),
        else ``None`` (also for non-numeric choices and a one-value range)."""
        if self.kind == "choice":
            nums = [c for c in self.choices if isinstance(c, (int, float)) and not isinstance(c, bool)]
            if len(nums) < 2 or len(nums) != len(self.choices) or value not in nums:
                return None
            return "low" if value == min(nums) else "high" if value == max(nums) else None
        lo, hi, v = float(self.low), float(self.high), float(value)
        if self.kind == "log":
            lo, hi, v = math.log(lo), math.log(hi), math.log(v)
        span = hi - lo
        if span <= 0:
            return None
        return "low" if v <= lo + EDGE_FRACTION * span else "high" if v >= hi - EDGE_FRACTION * span else None

    def range_text(self) -> str:
        """The range as text: ``"[0.0001, 0.1] (log scale)"`` or ``"{1, 2, 4}"``."""
        return ("{" + ", ".join(map(str, self.choices)) + "}" if self.kind == "choice"
                else f"[{_num(self.low)}, {_num(self.high)}]" + (" (log scale)" if self.kind == "log" else ""))


def _num(x: float | None) -> str:
    return "None" if x is None else (str(int(x)) if float(x).is_integer() and abs(x) < 1e6 else f"{x:g}")


def _number(text: str, item: str) -> float:
    """A bound of ``--search`` item ``item``; :class:`SweepError` (one line naming the item and the expected
    form) when it is not a finite number (:func:`geomlab.core.argv.finite_float`)."""
    return finite_float(text, f"--search {item!r}:", f"expected {_SPEC_HELP}", error=SweepError)


def _choice_value(text: str) -> Any:
    text = text.strip()
    try:
        return parse_json(text, "a --search choice")
    except JSONInputError:
        return {"true": True, "false": False}.get(text.lower(), text)


def parse_search(items: Iterable[str]) -> tuple[Dimension, ...]:
    """``["lr=log:1e-4:1e-1", "warmup=int:0:500", "config.tau=float:1:10", "config.group=choice:O,SO"]`` ->
    the :class:`Dimension` of each key, in order.

    Raises :class:`SweepError` (one line naming the item and the expected form) for a malformed item, a
    key that is neither a training key of :data:`TRAIN_KEYS` nor ``config.NAME``, a key given twice, an
    empty range (``LOW >= HIGH``), a log range that does not start above 0, non-integer int bounds or an
    empty choice list. Whether ``config.NAME`` exists is checked by :func:`check_space` (it needs the kind).
    """
    dims: list[Dimension] = []
    for item in items:
        key, sep, rest = str(item).partition("=")
        key = key.strip()
        kind, sep2, args = rest.partition(":")
        kind = kind.strip().lower()
        if not sep or not key or not sep2 or kind not in _KINDS:
            raise SweepError(f"--search expects {_SPEC_HELP}; got {item!r}")
        if key.startswith("config."):
            if not key[len("config."):]:
                raise SweepError(f"--search {item!r}: config. needs a model config key, e.g. config.tau")
        elif key not in TRAIN_KEYS:
            raise SweepError(f"--search {item!r}: {key!r} is not a searchable training key ({', '.join(TRAIN_KEYS)});"
                             " write config.NAME for a model config key")
        if any(d.key == key for d in dims):
            raise SweepError(f"--search names {key!r} twice")
        if kind == "choice":
            choices = tuple(_choice_value(c) for c in args.split(",") if c.strip())
            if not choices:
                raise SweepError(f"--search {item!r}: choice needs at least one value, e.g. {key}=choice:1,2,4")
            if len(set(map(repr, choices))) != len(choices):
                raise SweepError(f"--search {item!r}: a choice is listed twice")
            dims.append(Dimension(key, "choice", choices=choices))
            continue
        parts = args.split(":")
        if len(parts) != 2:
            raise SweepError(f"--search {item!r}: {kind} takes LOW:HIGH, e.g. {key}={kind}:1e-4:1e-1")
        low, high = (_number(p, item) for p in parts)
        if not low < high:
            raise SweepError(f"--search {item!r}: LOW must be below HIGH")
        if kind == "log" and low <= 0:
            raise SweepError(f"--search {item!r}: a log range must start above 0")
        if kind == "int" and not (low.is_integer() and high.is_integer()):
            raise SweepError(f"--search {item!r}: int bounds must be integers")
        dims.append(Dimension(key, kind, low, high))
    if not dims:
        raise SweepError(f"--search needs at least one key ({_SPEC_HELP})")
    return tuple(dims)


def check_space(space: Sequence[Dimension], kind: str, fixed_config: dict[str, Any] | None = None,
                fixed_train: dict[str, Any] | None = None) -> None:
    """Refuse, before any training, a ``config.NAME`` that model ``kind`` does not have and a key that is
    both fixed and searched. Raises :class:`SweepError` (one line) or the registry's ``ValueError`` for an
    unknown kind."""
    from geomlab.models import model_class

    known = set(model_class(kind).default_config())
    for d in space:
        if d.target == "model" and d.name not in known:
            raise SweepError(f"--search {d.key}: {kind!r} has no config key {d.name!r}; known: {', '.join(sorted(known))}")
        fixed = fixed_config if d.target == "model" else fixed_train
        if d.name in (fixed or {}):
            raise SweepError(f"{d.key} is both fixed ({'--config' if d.target == 'model' else '--' + d.name.replace('_', '-')})"
                             " and searched (--search); give it once")


def split_params(params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A trial's ``{"lr": 0.01, "config.tau": 3.0}`` -> ``({"lr": 0.01}, {"tau": 3.0})`` (training keys,
    model config keys)."""
    train = {k: v for k, v in params.items() if not k.startswith("config.")}
    model = {k[len("config."):]: v for k, v in params.items() if k.startswith("config.")}
    return train, model


def edges(space: Sequence[Dimension], best_params: dict[str, Any]) -> list[dict[str, Any]]:
    """The searched keys whose best value lies at an edge of their range: ``[{"key", "edge" ("low"/"high"),
    "value", "range"}]`` (empty when every optimum is inside)."""
    out = []
    for d in space:
        if d.key in best_params:
            side = d.edge(best_params[d.key])
            if side:
                out.append({"key": d.key, "edge": side, "value": best_params[d.key], "range": d.range_text()})
    return out


def edge_lines(found: list[dict[str, Any]]) -> list[str]:
    """One warning line per entry of :func:`edges`."""
    return [f"warning: the best {e['key']} ({_show(e['value'])}) lies at the {e['edge']} edge of the searched range "
            f"{e['range']}: the optimum may lie outside it; widen the range and sweep again" for e in found]


def _show(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)
