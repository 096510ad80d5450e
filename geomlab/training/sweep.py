"""Hyper-parameter sweeps through Optuna: ``python -m geomlab sweep`` and the report's lr choice.

A sweep searches training keys (``lr``, ``warmup``, ...) and model config keys (``config.tau``, ...) of one
model kind, parameter budget and task. Each Optuna trial trains the model once per seed with the shared
run spec (:func:`geomlab.training.runs.build`, the model sized by :func:`geomlab.models.budget.resolve_config`, i.e.
:func:`geomlab.models.config_for_budget`) and scores the mean over seeds of the task's validation metric
(BPC for character corpora, perplexity for word corpora: minimised; accuracy for the word problem:
maximised). The test split is never looked at.

* **Search space** (:func:`parse_search`): ``KEY=log:LOW:HIGH`` (log-uniform), ``KEY=float:LOW:HIGH``,
  ``KEY=int:LOW:HIGH`` (both ends included) or ``KEY=choice:A,B,C``; ``KEY`` is a training key
  (:data:`TRAIN_KEYS`) or ``config.NAME`` for a model config key.
* **A diverged trial** (:class:`geomlab.training.trainer.TrainingError`: a non-finite loss, gradient or weight) and a
  trial whose searched config the kind refuses (``ValueError``, e.g. no width meets the budget) end as
  Optuna ``PRUNED`` with the reason in the user attribute ``error`` (the summary calls them ``diverged`` /
  ``invalid``); the sweep goes on. Pruned rather than failed so that TPE counts them as worse than every
  finished trial and moves away from them (Optuna ignores failed trials; design choice).
* **Pruning** (optional): the first seed's periodic validations are reported as intermediate values and
  Optuna's ``MedianPruner`` stops a trial whose value is worse than the median of earlier trials at the
  same step, only in the second half of its first seed (lr sweeps: slow starters are not cut early).
* **Storage** (:func:`open_storage`): a file path is an Optuna journal (``JournalFileBackend``, one
  append-only log guarded by a lock file): several processes on one machine, or machines sharing a folder
  (NFS), can work on one study. SQLite is not the default because Optuna does not recommend it for
  parallel workers (its database lock makes concurrent writers fail with "database is locked"). A URL
  (``sqlite:///x.db``, ``postgresql://...``, ``mysql://...``) is an SQLAlchemy database
  (``optuna.storages.RDBStorage``, with a heartbeat so a killed worker's trial is marked failed).
* **Resuming**: a study is created once and loaded afterwards (``load_if_exists``); its setup (kind, task,
  budget, fixed keys, seeds, search space, metric) is stored on the study and a different setup under the
  same name is refused, so trials of different experiments never mix.
* **Edges** (:func:`edges`): when the best value of a numeric searched key lies at an edge of its range
  (continuous: in the outer tenth, on the sampled scale; choices: the smallest or largest), the optimum may
  lie outside the range; the summary says so.

Sources: Optuna (Akiba et al., KDD 2019: define-by-run studies, TPE sampler, median pruning); everything
else here is a design choice.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from geomlab.training.trainer import TrainingError

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


# ------------------------------------------------------------------------------------------- search space
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
        return ("{" + ", ".join(map(str, self.choices)) + "}" if self.kind == "choice"
                else f"[{_num(self.low)}, {_num(self.high)}]" + (" (log scale)" if self.kind == "log" else ""))


def _num(x: float | None) -> str:
    return "None" if x is None else (str(int(x)) if float(x).is_integer() and abs(x) < 1e6 else f"{x:g}")


def _number(text: str, item: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise SweepError(f"--search {item!r}: {text!r} is not a number (expected {_SPEC_HELP})") from None
    if not math.isfinite(value):
        raise SweepError(f"--search {item!r}: {text!r} is not a finite number")
    return value


def _choice_value(text: str) -> Any:
    text = text.strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
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


# ------------------------------------------------------------------------------------------------ storage
def open_storage(storage: str | Path | None):
    """An Optuna storage: ``None`` -> in memory (nothing written); a URL with ``://`` -> ``RDBStorage``
    (SQLAlchemy: ``sqlite:///runs/x.db``, ``postgresql://user@host/db``, ...; heartbeat 60 s, so a trial of a
    killed worker is marked failed after 2 minutes); anything else -> a journal file at that path
    (``JournalStorage(JournalFileBackend(path, JournalFileOpenLock))``; its folder is created).

    Raises :class:`SweepError` (one line) when the database cannot be opened (unknown dialect, missing
    driver, unreachable server)."""
    import optuna

    if storage is None:
        return optuna.storages.InMemoryStorage()
    text = str(storage)
    if "://" in text:
        import warnings

        try:
            with warnings.catch_warnings():  # the heartbeat is "experimental" in Optuna's terms since 2.9
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return optuna.storages.RDBStorage(text, heartbeat_interval=60, grace_period=120)
        except Exception as exc:  # sqlalchemy's ArgumentError / NoSuchModuleError / OperationalError, a driver
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise SweepError(f"cannot open the storage {text}: {reason}") from None
    from optuna.storages.journal import JournalFileBackend, JournalFileOpenLock

    path = Path(text)
    path.parent.mkdir(parents=True, exist_ok=True)
    return optuna.storages.JournalStorage(JournalFileBackend(str(path), JournalFileOpenLock(str(path))))


def open_study(storage, study_name: str, direction: str, setup: dict[str, Any] | None = None, *,
               sampler=None, pruner=None):
    """Create study ``study_name`` in ``storage`` (from :func:`open_storage`) or load it when it exists.

    ``setup`` (JSON-able) is stored on a new study (user attribute ``setup``); loading a study whose stored
    setup or direction differs raises :class:`SweepError` naming the differing fields (trials of another
    experiment are never mixed in)."""
    import optuna

    study = optuna.create_study(storage=storage, study_name=study_name, direction=direction, sampler=sampler,
                                pruner=pruner, load_if_exists=True)
    if study.direction.name.lower() != direction:
        raise SweepError(f"study {study_name!r} exists with direction {study.direction.name.lower()}, this sweep "
                         f"would {direction}; use another --study-name")
    if setup is not None:
        setup = json.loads(json.dumps(setup))
        old = study.user_attrs.get("setup")
        if old is None:
            study.set_user_attr("setup", setup)
        elif old != setup:
            diff = sorted(k for k in set(old) | set(setup) if old.get(k) != setup.get(k))
            raise SweepError(f"study {study_name!r} was made with another setup (differs in: {', '.join(diff)}); "
                             "use another --study-name, or the same options to continue it")
    return study


# --------------------------------------------------------------------------------------------- optimizing
def optimize(study, objective: Callable[[dict[str, Any], Any], float], space: Sequence[Dimension], *,
             n_trials: int | None = None, timeout: float | None = None,
             on_trial: Callable[[Any], None] | None = None) -> None:
    """Run ``n_trials`` more trials of ``study`` (or until ``timeout`` seconds have passed: no trial starts
    after it; the running one finishes), each calling ``objective(params, trial)`` with ``params`` = this
    trial's value of every :class:`Dimension` in ``space`` (``{"lr": 0.003, "config.tau": 4.0}``).

    ``objective`` returns the value (mean validation metric). It may raise
    :class:`geomlab.training.trainer.TrainingError` (a diverged run) or ``ValueError`` (a config the kind refuses): the
    trial then ends ``PRUNED`` with user attributes ``outcome`` (``"diverged"`` / ``"invalid"``) and
    ``error`` (the reason), and the study goes on; so does a non-finite value (``"diverged"``). It may raise
    ``optuna.TrialPruned`` after setting ``outcome`` ``"pruned"``. ``on_trial(frozen_trial)`` is called
    after each trial. Any other exception is recorded in ``error`` and propagates (Optuna marks the trial
    ``FAIL``)."""
    import optuna

    def _objective(trial) -> float:
        params = {d.key: d.suggest(trial) for d in space}
        t0 = time.perf_counter()
        try:
            value = objective(params, trial)
        except TrainingError as exc:  # the Trainer's "; stopped, the last good checkpoint is kept": no files here
            _end(trial, "diverged", str(exc).split("; stopped")[0], t0)
        except optuna.TrialPruned:
            trial.set_user_attr("duration_s", round(time.perf_counter() - t0, 3))
            raise
        except ValueError as exc:
            _end(trial, "invalid", str(exc).splitlines()[0] if str(exc) else type(exc).__name__, t0)
        except Exception as exc:  # a bug or a machine error: recorded on the trial, then raised (Optuna: FAIL)
            trial.set_user_attr("error", f"{type(exc).__name__}: {exc}".splitlines()[0][:300])
            raise
        value = float(value)
        if not math.isfinite(value):
            _end(trial, "diverged", f"the objective is {value} (non-finite)", t0)
        trial.set_user_attr("outcome", "complete")
        trial.set_user_attr("duration_s", round(time.perf_counter() - t0, 3))
        return value

    callbacks = [lambda s, t: on_trial(t)] if on_trial else None
    study.optimize(_objective, n_trials=n_trials, timeout=timeout, callbacks=callbacks)


def _end(trial, outcome: str, reason: str, t0: float):
    import optuna

    trial.set_user_attr("outcome", outcome)
    trial.set_user_attr("error", reason)
    trial.set_user_attr("duration_s", round(time.perf_counter() - t0, 3))
    raise optuna.TrialPruned(reason)


def trial_record(t) -> dict[str, Any]:
    """One trial as JSON: ``number``, ``state`` (``complete``, ``pruned`` (median pruner), ``diverged``,
    ``invalid``, ``failed`` (crashed or killed worker), ``running``), ``value`` (the objective; for a pruned
    trial Optuna's last intermediate value, the first seed's validation at ``pruned_at``; ``None`` when there
    is none), ``params``, and when known ``seed_values``, ``error``, ``pruned_at`` (step), ``duration_s``."""
    attrs = dict(t.user_attrs)
    state = t.state.name.lower()
    if state == "fail":
        state = "failed"
    elif state == "pruned":
        state = attrs.get("outcome", "pruned")
    rec = {"number": t.number, "state": state, "value": t.value, "params": dict(t.params)}
    for key in ("seed_values", "error", "pruned_at", "duration_s"):
        if key in attrs:
            rec[key] = attrs[key]
    return rec


def summary(study, space: Sequence[Dimension]) -> dict[str, Any]:
    """The study as JSON: ``study_name``, ``direction``, ``setup``, ``n_trials``, ``states`` (count per
    state), ``best`` (``number``, ``value``, ``params``, ``seed_values``; ``None`` until a trial completes),
    ``edges`` (:func:`edges` of the best params) and ``trials`` (:func:`trial_record` of every trial)."""
    trials = [trial_record(t) for t in study.get_trials(deepcopy=False)]
    states: dict[str, int] = {}
    for t in trials:
        states[t["state"]] = states.get(t["state"], 0) + 1
    complete = [t for t in trials if t["state"] == "complete" and t["value"] is not None]
    best = None
    if complete:
        pick = max if study.direction.name == "MAXIMIZE" else min
        b = pick(complete, key=lambda t: t["value"])
        best = {k: b[k] for k in ("number", "value", "params") if k in b}
        if "seed_values" in b:
            best["seed_values"] = b["seed_values"]
    return {"study_name": study.study_name, "direction": study.direction.name.lower(),
            "setup": study.user_attrs.get("setup"), "n_trials": len(trials), "states": states, "best": best,
            "edges": edges(space, best["params"]) if best else [], "trials": trials}


def write_json(data: dict[str, Any], path: str | Path) -> Path:
    """Write ``data`` to ``path`` atomically (a temporary file beside it, then a rename: workers writing the
    same summary never leave a half-written file). Returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, default=float, allow_nan=True), encoding="utf-8")
    os.replace(tmp, path)
    return path


# ------------------------------------------------------------------------------------------- model sweeps
@dataclass
class SweepSetup:
    """What one sweep trains (stored on the study; a loaded study must have the same).

    kind: registered model kind. data: the task string of ``train --data``. budget: effective parameter
    budget (``config_for_budget``), or ``None`` to use ``config`` with the kind's defaults. config: fixed
    model config keys. train: fixed :class:`geomlab.training.trainer.TrainConfig` keys (not searched; ``seed``,
    ``final_eval`` and ``device`` are the sweep's). seeds: each trial trains once per seed; the objective is
    the mean. search: the search space as text (:meth:`Dimension.spec`). metric / direction: the task's
    validation metric and ``"minimize"`` / ``"maximize"`` (set by :func:`for_task`).
    """

    kind: str
    data: str
    budget: int | None = None
    config: dict[str, Any] = field(default_factory=dict)
    train: dict[str, Any] = field(default_factory=dict)
    seeds: tuple[int, ...] = (0,)
    search: tuple[str, ...] = DEFAULT_SEARCH
    metric: str = ""
    direction: str = "minimize"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["seeds"], d["search"] = list(self.seeds), list(self.search)
        return d

    def for_task(self, task) -> "SweepSetup":
        """This setup with ``metric`` / ``direction`` from ``task`` (``task.metric``,
        ``task.higher_is_better``)."""
        self.metric = str(task.metric)
        self.direction = "maximize" if getattr(task, "higher_is_better", False) else "minimize"
        return self


def default_study_name(kind: str, data: str, budget: int | None = None, group: str | None = None) -> str:
    """``KIND[-GROUP]-DATA[-SIZE]``, e.g. ``lstm-tinyshakespeare-50k`` (file-name safe)."""
    stem = Path(data).stem if Path(data).suffix else data
    parts = [kind, group or "", stem, (f"{budget / 1000:.0f}k" if budget >= 1000 else str(budget)) if budget else ""]
    return "-".join(p for p in (re.sub(r"[^A-Za-z0-9._-]+", "-", x).strip("-") for x in parts) if p)


def trial_spec(setup: SweepSetup, params: dict[str, Any], seed: int, device: str = "auto"):
    """The :class:`geomlab.training.runs.RunSpec` of one seed of a trial: the ``strict`` preset (the budget met
    within 5%), ``setup``'s kind, task, budget and fixed model keys with the trial's model keys over them; the
    recipe is the one set of defaults (:class:`geomlab.training.config.Recipe`), then ``setup.train``, the trial's
    training keys, ``seed``, ``device`` and ``final_eval=False``."""
    from geomlab.training.runs import RunSpec

    train_keys, model_keys = split_params(params)
    train = {**setup.train, **train_keys, "seed": int(seed), "device": device, "final_eval": False}
    return RunSpec.preset("strict", kind=setup.kind, data=setup.data, params=setup.budget,
                          model_overrides={**setup.config, **model_keys}, **train)


def train_trial(setup: SweepSetup, task, params: dict[str, Any], trial=None, *, device: str = "auto",
                prune_after: int | None = None, log: Callable[[str], None] | None = None) -> float:
    """Train ``setup`` with one trial's ``params`` once per seed and return the mean validation metric.

    Each seed is the run :func:`trial_spec` describes, built by :func:`geomlab.training.runs.build` on ``task`` (the
    model config from :func:`geomlab.models.budget.resolve_config`, the weights seeded with the seed; no
    checkpoint files; ``final_eval=False``: the last evaluation scores the first ``eval_tokens`` targets of
    the valid split only). The per-seed values go to the trial's user attribute ``seed_values``. With
    ``trial`` and ``prune_after`` (a step), the first seed's periodic validations are reported to Optuna at
    their step and from ``prune_after`` on a trial the pruner rejects is stopped (``optuna.TrialPruned``,
    user attributes ``outcome="pruned"``, ``pruned_at``).

    Raises :class:`geomlab.training.trainer.TrainingError` naming the seed when a run diverges, ``ValueError`` for a
    config the kind refuses."""
    from geomlab.training import runs

    values = []
    for i, seed in enumerate(setup.seeds):
        holder: dict[str, Any] = {}

        def _on_progress(p, i=i):
            if p.event != "eval" or trial is None or i > 0 or prune_after is None:
                return
            value = p.valid.get(setup.metric)
            if value is None or not math.isfinite(value):
                return
            trial.report(float(value), int(p.step))
            if p.step >= prune_after and trial.should_prune():
                holder["pruned_at"] = int(p.step)
                holder["trainer"].stop()

        trainer = runs.build(trial_spec(setup, params, seed, device), task=task, callback=_on_progress).trainer
        holder["trainer"] = trainer
        try:
            result = trainer.run()
        except TrainingError as exc:
            raise TrainingError(f"seed {seed}: {exc}", exc.step, exc.quantity) from exc
        if "pruned_at" in holder:
            import optuna

            trial.set_user_attr("outcome", "pruned")
            trial.set_user_attr("pruned_at", holder["pruned_at"])
            raise optuna.TrialPruned(f"pruned at step {holder['pruned_at']} of seed {seed}")
        value = float(result.metrics[f"valid_{setup.metric}"])
        values.append(value)
        if trial is not None:
            trial.set_user_attr("seed_values", list(values))
        if log and len(setup.seeds) > 1:
            log(f"  seed {seed}: valid {setup.metric} {value:.4f}")
    return sum(values) / len(values)


def _fmt(params: dict[str, Any]) -> str:
    return " ".join(f"{k}={_show(v)}" for k, v in params.items())


def run_sweep(setup: SweepSetup, *, n_trials: int | None = 20, timeout: float | None = None,
              storage: str | Path | None = None, study_name: str | None = None, summary_path: str | Path | None = None,
              pruning: bool = True, sampler: str = "tpe", sampler_seed: int | None = None, device: str = "auto",
              log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run (or continue) a sweep of ``setup`` and return its :func:`summary`.

    ``storage``: see :func:`open_storage` (``None`` = in memory). ``study_name``: default
    :func:`default_study_name`. ``summary_path``: the JSON summary, rewritten after every trial (``None`` =
    not written). ``pruning``: the median pruner on the first seed's periodic validations (needs
    ``train["eval_every"] > 0``). ``sampler``: ``"tpe"`` (default), ``"random"`` or ``"grid"`` (every
    combination of ``choice`` keys once; refused for ranges). ``sampler_seed`` seeds the sampler.

    Raises :class:`SweepError` / ``ValueError`` (one line) for a bad request, before any training."""
    import optuna

    from geomlab.data.registry import make_task

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    space = parse_search(setup.search)
    task = make_task(setup.data)
    if getattr(task, "kind", "") == "regression":
        raise SweepError("the Gaussian-process regression task trains a CEM regressor, not a token model: run "
                         "`geomlab bench gp` (see docs/cem.md)")
    check_space(space, setup.kind, setup.config, setup.train)
    setup.for_task(task)
    setup.search = tuple(d.spec() for d in space)
    from geomlab.training.trainer import TrainConfig

    base = TrainConfig.from_dict(setup.train)  # the fixed keys are checked before any trial
    if sampler == "grid":
        ranges = [d.key for d in space if d.kind != "choice"]
        if ranges:
            raise SweepError(f"--sampler grid needs choice keys only (e.g. lr=choice:1e-3,3e-3,1e-2); {', '.join(ranges)} "
                             "are ranges")
        smp = optuna.samplers.GridSampler({d.key: list(d.choices) for d in space}, seed=sampler_seed)
    elif sampler == "random":
        smp = optuna.samplers.RandomSampler(seed=sampler_seed)
    elif sampler == "tpe":
        smp = optuna.samplers.TPESampler(seed=sampler_seed)
    else:
        raise SweepError(f"unknown sampler {sampler!r}; use tpe, random or grid")
    prune_after = None
    if pruning and base.eval_every > 0:
        prune_after = max(1, base.steps // 2)
    pruner = optuna.pruners.MedianPruner(n_startup_trials=5) if prune_after else optuna.pruners.NopPruner()
    name = study_name or default_study_name(setup.kind, setup.data, setup.budget, setup.config.get("group"))
    study = open_study(open_storage(storage), name, setup.direction, setup.to_dict(), sampler=smp, pruner=pruner)
    before = len(study.trials)
    goal = "maximise" if setup.direction == "maximize" else "minimise"
    budget = f" at {setup.budget:,} parameters" if setup.budget else ""
    log(f"sweep {name}: {setup.kind}{budget} on {task.name}; {goal} the mean valid {setup.metric} over seed(s) "
        f"{', '.join(map(str, setup.seeds))}")
    log(f"  search {' '.join(setup.search)}; storage {storage or 'in memory'}"
        + (f" ({before} earlier trial(s))" if before else ""))

    def objective(params, trial):
        log(f"trial {trial.number}: {_fmt(params)} ...")
        return train_trial(setup, task, params, trial, device=device, prune_after=prune_after, log=log)

    def on_trial(t):
        rec = trial_record(t)
        if rec["state"] == "complete":
            line = f"trial {t.number}: valid {setup.metric} {rec['value']:.4f}"
        elif rec["state"] == "pruned":
            line = f"trial {t.number}: pruned at step {rec.get('pruned_at')} (worse than the median)"
        else:
            line = f"trial {t.number}: {rec['state']}: {rec.get('error', '')}"
        try:
            b = study.best_trial
            line += f" (best: trial {b.number}, {b.value:.4f})"
        except ValueError:
            pass
        log(line)
        if summary_path:
            write_json({**summary(study, space), "storage": str(storage) if storage else None}, summary_path)

    try:
        optimize(study, objective, space, n_trials=n_trials, timeout=timeout, on_trial=on_trial)
    finally:
        result = {**summary(study, space), "storage": str(storage) if storage else None}
        if summary_path:
            write_json(result, summary_path)
    return result


__all__ = [
    "TRAIN_KEYS", "DEFAULT_SEARCH", "EDGE_FRACTION", "SweepError", "Dimension", "parse_search", "check_space",
    "split_params", "edges", "edge_lines", "open_storage", "open_study", "optimize", "trial_record", "summary",
    "write_json", "SweepSetup", "default_study_name", "train_trial", "run_sweep",
]
