"""Activation patching: a hidden state of one text replaced by the state of another text at the same place,
and the model run on from it; a sweep over every layer and position of how much of a prediction each state
carries.

A :class:`PatchPoint` is one layer's state, the value a patch replaces, in one of three layouts:
``"positions"`` (a hook point seen once per run, positions on axis 1: residual streams, OSMFormer states),
``"steps"`` (a recurrence's hook points, seen once per position: the OSM-RNN state, the LSTM's ``c`` and ``h``)
and ``"last_call"`` (CEM's iterates, seen once per recursion step: the last call is the sub-block's output,
positions on axis 1 of each call's value).

Source: activation patching / causal tracing (Meng et al. 2022, "Locating and Editing Factual Associations
in GPT", §2.1; Heimersheim & Nanda 2024, "How to use and interpret activation patching"), written for
geomlab's hook points (:mod:`geomlab.models.hooks`).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import torch

from geomlab.models.hooks import hook_points, run_with_cache, run_with_hooks
from geomlab.whatif.outcome import LN2, Outcome, log_softmax

__all__ = ["PatchPoint", "Sweep", "Target", "patch_points", "patch", "patching_sweep", "token_swap_sweep",
           "choose_target", "default_stand_in", "METRICS", "SWEEP_SPAN", "SMALL_DIFFERENCE", "BARELY", "AHEAD",
           "STAND_INS"]

METRICS = ("logit_diff", "kl", "target_prob")
#: Each metric in words, with its unit, for captions and summary lines.
METRIC_WORDS = {"logit_diff": "logit difference z[y] − z[y′] (nats)", "kl": "KL(clean ‖ patched) (bits)",
                "target_prob": "p(y)"}
#: Each metric's unit, after a number in a sentence.
METRIC_UNITS = {"logit_diff": "nats", "kl": "bits", "target_prob": ""}

BARELY = {"logit_diff": 0.5, "kl": 0.1, "target_prob": 0.05}
"""Below this difference between the clean and the corrupted run's metric the swap barely changes the
prediction (:attr:`Sweep.barely_changes`), so no patch can restore much, however large the share of that
small difference it restores (design choice, per metric): half a nat of logit difference (the odds of y
against y′ move by less than a factor e^0.5 ≈ 1.65), 0.1 bits of KL divergence (a fair coin made 68:32), 5
percentage points of p(y)."""


@dataclass(frozen=True)
class PatchPoint:
    """One layer's state that a patch replaces (design choice).

    ``label``: the layer in words (``"block 0"``); ``hooks``: the hook points replaced together (the LSTM's
    ``c`` and ``h`` of one layer); ``layout``: ``"positions"``, ``"steps"`` or ``"last_call"`` (module
    docstring)."""

    label: str
    hooks: tuple[str, ...]
    layout: str


def patch_points(model: torch.nn.Module) -> list[PatchPoint]:
    """The states one patches, one per layer, in depth order (design choice, per kind):

    ``transformer``, ``llama``, ``grassmann``, ``grassmann-attn``: ``blocks.l.hook_resid_post`` (the residual
    stream after block l); ``osmformer``: ``layers.l.hook_state`` (``diag.layers.l.hook_state`` on the torus
    without rotation, whose forward runs on the diagonals); ``osm-rnn``: ``hook_state`` (per step);
    ``lstm``: ``layers.l.hook_c`` and ``layers.l.hook_h`` (per step, both at once); ``cem``: the output
    iterate of layer l (``stack.layers.l.1.hook_iterate``, last call: the MLP sub-block's result).
    Raises ``ValueError`` for a kind without patch points."""
    kind = getattr(model, "kind", None)
    names = set(hook_points(model))
    if kind in ("transformer", "llama", "grassmann", "grassmann-attn"):
        L = len(model.blocks)
        return [PatchPoint(f"block {l}", (f"blocks.{l}.hook_resid_post",), "positions") for l in range(L)]
    if kind == "osmformer":
        diag = getattr(model, "_diagonal", False) and model.config["position"] != "rotation"
        prefix = "diag." if diag else ""
        return [PatchPoint(f"layer {l}", (f"{prefix}layers.{l}.hook_state",), "positions")
                for l in range(model.n_layers)]
    if kind == "osm-rnn":
        return [PatchPoint("state", ("hook_state",), "steps")]
    if kind == "lstm":
        return [PatchPoint(f"layer {l}", (f"layers.{l}.hook_c", f"layers.{l}.hook_h"), "steps")
                for l in range(len(model.layers))]
    if kind == "cem":
        L = sum(1 for n in names if n.startswith("stack.layers.") and n.endswith(".1.hook_iterate"))
        return [PatchPoint(f"layer {l}", (f"stack.layers.{l}.1.hook_iterate",), "last_call") for l in range(L)]
    raise ValueError(f"no patch points for model kind {kind!r}")


@contextmanager
def _eval(model: torch.nn.Module) -> Iterator[None]:
    """Eval mode and no gradients for the block (every hook point writable, no dropout); the mode restored."""
    was = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(was)


def _as_batch(tokens) -> torch.Tensor:
    t = torch.as_tensor(np.asarray(tokens), dtype=torch.long)
    if t.dim() != 1 or not len(t):
        raise ValueError(f"tokens must be a non-empty 1-d sequence of ids, got shape {tuple(t.shape)}")
    return t[None]


def _device(model: torch.nn.Module):
    p = next(model.parameters(), None)
    return p.device if p is not None else torch.device("cpu")


def _cache_values(model, tokens: torch.Tensor, point: PatchPoint):
    """``(logits (B, T, V), {hook: (B, T, ...) per position})`` of one run that reads the point's hooks."""
    logits, cache = run_with_cache(model, tokens, list(point.hooks))
    if point.layout == "last_call":
        cache = {n: v[:, -1] for n, v in cache.items()}
    return logits, cache


def _replacer(point: PatchPoint, src: torch.Tensor, rows: torch.Tensor):
    """A hook function that writes ``src[rows[b]]`` (``src`` the source's values by position, ``(T_s, ...)``)
    at position ``rows[b]`` of batch row ``b``; every other value is kept as it is."""
    batch = torch.arange(len(rows), device=rows.device)

    def fn(value: torch.Tensor, hook) -> torch.Tensor:
        if point.layout == "steps":  # value (B, ...): the state after token hook.step
            hit = rows == hook.step
            if not bool(hit.any()):
                return value
            out = value.clone()
            out[hit] = src[hook.step].to(value.dtype)
            return out
        if point.layout == "last_call" and hook.step != fn.calls - 1:
            return value
        out = value.clone()
        out[batch, rows] = src[rows].to(value.dtype)
        return out

    fn.calls = 0
    return fn


def _run_patched(model, tokens: torch.Tensor, point: PatchPoint, source: dict[str, torch.Tensor],
                 rows: torch.Tensor, calls: int) -> torch.Tensor:
    """Logits ``(B, T, V)`` of ``tokens`` ``(B, T)`` with row b's value at position ``rows[b]`` replaced by
    the source's (``source[hook]`` ``(T_s, ...)``); ``calls``: the hook's calls per run (``last_call``)."""
    hooks = []
    for name in point.hooks:
        fn = _replacer(point, source[name], rows)
        fn.calls = calls
        hooks.append((name, fn))
    return run_with_hooks(model, tokens, hooks)


def _calls(model, tokens: torch.Tensor, point: PatchPoint) -> int:
    """How many times the point's first hook runs in one pass (CEM: recursion steps + 1)."""
    if point.layout != "last_call":
        return 1
    _, cache = run_with_cache(model, tokens[:, :1], [point.hooks[0]])
    return int(cache[point.hooks[0]].shape[1])


def patch(model: torch.nn.Module, tokens: Sequence[int], source_tokens: Sequence[int], point: PatchPoint | str,
          position: int) -> Outcome:
    """Run ``source_tokens`` reading ``point``, then ``tokens`` with its value at ``position`` replaced by the
    source's (a per-step point: the state after token ``position``); everything downstream is recomputed.

    Args:
        model: a sequence model of a kind :func:`patch_points` knows (run in eval mode, no gradients).
        tokens, source_tokens: 1-d token ids, lengths ``T`` and ``T_s`` (may differ).
        point: a :class:`PatchPoint` or its label (``"block 1"``) or its first hook name.
        position: ``0 <= position < min(T, T_s)``.

    Returns an :class:`~geomlab.whatif.outcome.Outcome`: ``before`` the logits ``(T, V)`` of ``tokens`` run
    with the same hook points read (so both runs share their arithmetic: the LSTM's step-by-step recurrence),
    ``after`` the patched run's; ``geometry``: ``{suffix}_before`` (the value ``tokens`` had) and
    ``{suffix}_after`` (the source's), ``suffix`` the hook name after ``hook_`` (``resid_post``, ``state``,
    ``c``, ``h``, ``iterate``). Raises ``ValueError`` for an unknown point or a position outside both texts.
    Source: activation patching (Meng et al. 2022, §2.1)."""
    point = _resolve(model, point)
    tok, src = _as_batch(tokens), _as_batch(source_tokens)
    if not 0 <= position < min(tok.shape[1], src.shape[1]):
        raise ValueError(f"position {position} must exist in both texts (lengths {tok.shape[1]}, {src.shape[1]})")
    dev = _device(model)
    tok, src = tok.to(dev), src.to(dev)
    with _eval(model):
        before, own = _cache_values(model, tok, point)
        _, source = _cache_values(model, src, point)
        calls = _calls(model, tok, point)
        rows = torch.tensor([position], device=dev)
        after = _run_patched(model, tok, point, {n: v[0] for n, v in source.items()}, rows, calls)
    geometry = {}
    for name in point.hooks:
        suffix = name.rsplit("hook_", 1)[-1]
        geometry[f"{suffix}_before"] = own[name][0, position].cpu().numpy()
        geometry[f"{suffix}_after"] = source[name][0, position].cpu().numpy()
    return Outcome(tokens=tok[0].cpu().numpy(), before=before[0].float().cpu().numpy(),
                   after=after[0].float().cpu().numpy(), position=int(position),
                   what=f"{point.label} at position {position} patched from the source text", geometry=geometry)


def _resolve(model, point: PatchPoint | str) -> PatchPoint:
    points = patch_points(model)
    if isinstance(point, PatchPoint):
        if point not in points:
            raise ValueError(f"{point} is not a patch point of this model")
        return point
    for p in points:
        if point == p.label or point in p.hooks:
            return p
    raise ValueError(f"unknown patch point {point!r}; known: {', '.join(p.label for p in points)}")


@dataclass
class Sweep:
    """A patching sweep (design choice): ``values`` ``(L, T)`` float64, the metric at the target with layer
    ``layers[l]`` patched at position ``positions[t]``; ``clean`` / ``corrupt``: the metric of the unpatched
    source / corrupted run; ``target_position``, ``target_token``: where and what is predicted (the clean
    run's most likely token y); ``alt_token``: y', the corrupted run's most likely token other than y, which
    the logit difference z[y] - z[y'] weighs y against (-1: unknown); ``seconds``: wall time of the sweep;
    ``runs``: the patched runs it made."""

    values: np.ndarray
    layers: list[str]
    positions: np.ndarray
    metric: str
    clean: float
    corrupt: float
    target_position: int
    target_token: int
    seconds: float = 0.0
    runs: int = 0
    alt_token: int = -1

    def small(self) -> bool:
        """Whether clean and corrupted differ by less than :data:`SMALL_DIFFERENCE` (then :meth:`recovered`
        divides noise by almost nothing: read ``values``)."""
        return abs(self.clean - self.corrupt) < SMALL_DIFFERENCE

    @property
    def barely_changes(self) -> bool:
        """Whether the swap barely changes the prediction: clean and corrupted differ by less than the
        metric's :data:`BARELY` (never, for a metric it does not list), so a cell that restores all of the
        difference still moves the prediction little. :meth:`describe` then says so."""
        return abs(self.clean - self.corrupt) < BARELY.get(self.metric, 0.0)

    def describe(self, names: Sequence[str]) -> str:
        """What the sweep reads, in words, for the app's and the CLI's summary line: ``the prediction at
        position 33 of 'h' (the clean run's top guess): logit difference z['h'] − z['e'] ('e': the corrupted
        run's likeliest token other than 'h') clean 13.487, corrupted 10.440 nats``. ``names``: the
        vocabulary's tokens as shown (the caller escapes them for its medium). When the swap barely changes
        the prediction (:attr:`barely_changes`) the line ends with a warning that says so, how far apart the
        two runs are and which numbers to read: ``… nats. Warning: the swap barely changes this prediction
        (0.184 nats apart, under 0.5): …``. The one place for these words (the app shows the line as a
        warning then, ``geomlab whatif --patch`` prints it)."""
        def name(i: int) -> str:
            return f"'{names[i]}'" if 0 <= i < len(names) else "?"

        y = name(self.target_token)
        head = f"the prediction at position {self.target_position} of {y} (the clean run's top guess)"
        unit = METRIC_UNITS.get(self.metric, "")
        if self.metric == "logit_diff" and self.alt_token >= 0:
            y_alt = name(self.alt_token)
            line = (f"{head}: logit difference z[{y}] − z[{y_alt}] ({y_alt}: the corrupted run's likeliest token "
                    f"other than {y}) clean {self.clean:.3f}, corrupted {self.corrupt:.3f} nats")
        else:
            line = (f"{head}: {METRIC_WORDS.get(self.metric, self.metric)} clean {self.clean:.3f}, corrupted "
                    f"{self.corrupt:.3f}")
        if not self.barely_changes:
            return line
        gap = f"{abs(self.clean - self.corrupt):.3g}" + (f" {unit}" if unit else "")
        read = ("each cell is the metric itself, not a share of a difference that small" if self.small() else
                "a cell that restores all of it still moves the prediction little, so a large share restored "
                "is not a strong result")
        return (f"{line}. Warning: the swap barely changes this prediction ({gap} apart, under "
                f"{BARELY[self.metric]:g}): {read}")

    def recovered(self) -> np.ndarray:
        """``(values - corrupt) / (clean - corrupt)``, ``(L, T)``: 0 no effect, 1 the clean prediction fully
        restored (NaN where ``clean == corrupt``)."""
        span = self.clean - self.corrupt
        with np.errstate(invalid="ignore", divide="ignore"):
            return (self.values - self.corrupt) / span if span else np.full_like(self.values, np.nan)


SWEEP_SPAN = 128
"""Positions a token-swap sweep reads at most: the ones ending at its target (design choice: a sweep costs one
run per layer and position; longer texts are cut to this window before the target)."""

SMALL_DIFFERENCE = 0.05
"""Below this logit difference between the clean and the corrupted run, the share of it a patch restores is
noise divided by almost nothing: read the raw metric instead (:meth:`Sweep.small`; design choice)."""


def token_swap_sweep(model: torch.nn.Module, tokens: Sequence[int], position: int, stand_in: int,
                     target: int, span: int = SWEEP_SPAN) -> Sweep:
    """The sweep of one swapped token, as the app's Patching heatmap and ``geomlab whatif --patch`` read it:
    the token at ``position`` of ``tokens`` (1-d ids, the clean text) replaced by the id ``stand_in`` (the
    corrupted text), every layer patched from the clean text at each position from ``position`` to
    ``target`` (earlier ones, which the two texts share, hold the corrupted value; the run reads the last
    ``span`` positions up to ``target``), and the prediction read at ``target`` (:func:`patching_sweep`, ``logit_diff``). The sweep's
    positions and target are the text's (not the window's).

    Raises ``ValueError`` for a ``target`` not after ``position``, past the text or ``span`` or more
    positions after it, or a ``stand_in`` equal to the token it replaces. Design choice."""
    tok, corrupt, hi = _swapped(tokens, position, stand_in, span)
    position, target = int(position), int(target)
    if not position < target <= hi:
        raise ValueError(f"target {target} outside {position + 1}..{hi} (after the swapped token, within "
                         f"{span} positions)")
    start = max(0, target - span + 1)
    sweep = patching_sweep(model, corrupt[start:target + 1], tok[start:target + 1], target_position=target - start,
                           first=position - start)
    sweep.positions = sweep.positions + start
    sweep.target_position = target
    return sweep


def _swapped(tokens: Sequence[int], position: int, stand_in: int,
             span: int) -> tuple[torch.Tensor, torch.Tensor, int]:
    """``(clean (T,), corrupted (T,), hi)``: the text's ids and the same with the token at ``position``
    replaced by ``stand_in``; ``hi`` the last position a sweep of the swap may read. ``ValueError`` for a
    position with nothing after it or a stand-in equal to the token it replaces."""
    tok = torch.as_tensor(tokens, dtype=torch.long).reshape(-1)
    T, position = len(tok), int(position)
    if not 0 <= position < T - 1:
        raise ValueError(f"position {position} outside 0..{T - 2} (a later position reads its token)")
    if int(stand_in) == int(tok[position]):
        raise ValueError(f"the stand-in is the token at position {position} already: give a different one")
    corrupt = tok.clone()
    corrupt[position] = int(stand_in)
    return tok, corrupt, min(T - 1, position + span - 1)


AHEAD = 8
"""Positions after the swapped token among which :func:`choose_target` picks the default target (design
choice: the heatmap draws every position from the swapped token to the target, so a near target keeps its
columns readable; 16 left the share of default sweeps that barely change the prediction where 8 put it, on
the bundled checkpoints' default texts, ``geomlab bench whatif --targets``)."""

#: Stand-ins tried in turn for the token at the cursor (:func:`default_stand_in`; design choice: common
#: characters).
STAND_INS = ("e", " ", "a")


def default_stand_in(tokens: Sequence[str], current: str) -> str:
    """The default token to put in place of ``current``: the first of :data:`STAND_INS`, then of ``tokens``
    (a vocabulary's tokens, in order), that is in ``tokens`` and differs from ``current``; ``current`` itself
    when there is none (a one-token vocabulary). Design choice."""
    tokens = list(tokens)
    for cand in (*STAND_INS, *tokens):
        if cand != current and cand in tokens:
            return cand
    return current


@dataclass(frozen=True)
class Target:
    """The default target of a token-swap sweep (:func:`choose_target`): ``position`` (the text's);
    ``candidates`` ``(K,)`` the positions weighed; ``changes`` ``(K,)`` float64, how far the swap moves the
    logit difference at each, ``|clean - corrupted|`` in nats (:attr:`Sweep.barely_changes`' measure);
    ``later``: whether the position came from the candidates after the next one (the rule's first choice);
    ``seconds``: wall time of the choice."""

    position: int
    candidates: np.ndarray
    changes: np.ndarray
    later: bool
    seconds: float = 0.0

    @property
    def change(self) -> float:
        """The change at the chosen position (nats)."""
        return float(self.changes[list(self.candidates).index(self.position)])

    def describe(self) -> str:
        """How the position was chosen, for the app's and the CLI's summary line (the one place for these
        words): ``target 34 chosen: the largest change among positions 32–38 (2.31 nats)``; when no position
        after the next reaches :data:`BARELY`, ``target 31 chosen: the largest change among positions 31–38
        (0.412 nats; none from 32 on reaches 0.5)``; with one candidate, ``target 31: the only position the
        sweep can read``."""
        lo, hi = int(self.candidates[0]), int(self.candidates[-1])
        if lo == hi:
            return f"target {self.position}: the only position the sweep can read"
        first = lo + 1 if self.later else lo
        among = f"position {first}" if first == hi else f"positions {first}–{hi}"
        line = f"target {self.position} chosen: the largest change among {among} ({self.change:.3g} nats"
        if not self.later:
            line += f"; none from {lo + 1} on reaches {BARELY['logit_diff']:g}"
        return line + ")"


def choose_target(model: torch.nn.Module, tokens: Sequence[int], position: int, stand_in: int,
                  span: int = SWEEP_SPAN, ahead: int = AHEAD) -> Target:
    """The default target of :func:`token_swap_sweep`: a position where swapping the token at ``position``
    (1-d ids ``tokens``, the clean text; ``stand_in`` the id put in its place) visibly moves the prediction.

    Each candidate ``t`` in ``position + 1 .. min(hi, position + ahead)`` (``hi`` as the sweep allows) is read
    as its sweep would read it: the clean and the corrupted run of the sweep's window (the last ``span``
    positions up to ``t``), the logit difference z[y] − z[y'] with y and y' as :func:`patching_sweep` defines
    them, and its change ``|clean - corrupted|``. Rule (design choice): the candidate from ``position + 2``
    on with the largest change, if that change reaches :data:`BARELY` (a target after the next position lets
    the heatmap show the token's information moving along the text; at the next position it is read at the
    swapped position itself); else the candidate with the largest change of all. Ties go to the nearest.

    Cost: no patched run; one batched forward pass of the clean and the corrupted window when the text fits
    in ``span`` positions (two when it does not). Returns a :class:`Target`. Raises ``ValueError`` for a
    ``position`` with nothing after it, a ``stand_in`` equal to the token it replaces or ``ahead < 1``."""
    if int(ahead) < 1:
        raise ValueError(f"ahead must be at least 1, got {ahead}")
    tok, corrupt, hi = _swapped(tokens, position, stand_in, span)
    position = int(position)
    cands = np.arange(position + 1, min(hi, position + int(ahead)) + 1)
    t0 = time.perf_counter()
    # each candidate's window starts where its sweep's does; windows of one length run as one batch
    starts = {int(t): max(0, int(t) - span + 1) for t in cands}
    ends: dict[int, int] = {}
    for t, s in starts.items():
        ends[s] = max(ends.get(s, t), t)
    logits: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # window start -> (clean, corrupted) (n, V)
    dev = _device(model)
    point = patch_points(model)[0]  # read as the sweep reads its clean and corrupted runs
    with _eval(model):
        by_length: dict[int, list[int]] = {}
        for s, e in ends.items():
            by_length.setdefault(e - s + 1, []).append(s)
        for n, group in by_length.items():
            rows = torch.stack([w[s:s + n] for s in group for w in (tok, corrupt)]).to(dev)
            out = _cache_values(model, rows, point)[0].float().cpu().numpy()
            for i, s in enumerate(group):
                logits[s] = (out[2 * i], out[2 * i + 1])
    changes = np.empty(len(cands))
    for i, t in enumerate(cands):
        s = starts[int(t)]
        clean, corrupted = logits[s][0][t - s], logits[s][1][t - s]
        y, y_alt = _tokens_weighed(clean, corrupted)
        both = _metric("logit_diff", np.stack([clean, corrupted]), None, y, y_alt)
        changes[i] = abs(float(both[0]) - float(both[1]))
    later = len(cands) > 1 and bool(changes[1:].max() >= BARELY["logit_diff"])
    pick = 1 + int(np.argmax(changes[1:])) if later else int(np.argmax(changes))
    return Target(position=int(cands[pick]), candidates=cands, changes=changes, later=later,
                  seconds=time.perf_counter() - t0)


def _tokens_weighed(clean_logits: np.ndarray, corrupt_logits: np.ndarray) -> tuple[int, int]:
    """``(y, y')`` at one position from the clean and the corrupted run's logits ``(V,)``: y the clean run's
    most likely token, y' the corrupted run's most likely token other than y (the logit difference weighs
    z[y] against z[y'])."""
    y = int(np.argmax(clean_logits))
    order = np.argsort(-corrupt_logits, kind="stable")
    return y, int(order[0] if order[0] != y else order[1])


def _metric(metric: str, logits: np.ndarray, clean_lp: np.ndarray, y: int, y_alt: int) -> np.ndarray:
    """The metric of logits ``(N, V)`` at the target: ``logit_diff`` ``z[y] - z[y_alt]`` (nats of logit),
    ``kl`` KL(p_clean || p) in bits, ``target_prob`` ``p(y)``."""
    if metric == "logit_diff":
        return logits[:, y].astype(np.float64) - logits[:, y_alt]
    lp = log_softmax(logits)
    if metric == "kl":
        return (np.exp(clean_lp) * (clean_lp - lp)).sum(-1) / LN2
    return np.exp(lp[:, y])


def patching_sweep(model: torch.nn.Module, tokens: Sequence[int], source_tokens: Sequence[int],
                   target_position: int | None = None, metric: str = "logit_diff", batch: int = 64,
                   first: int = 0) -> Sweep:
    """Patch every (layer, position) of the corrupted run (``tokens``) with the clean run's (``source_tokens``)
    value and measure the prediction at ``target_position``.

    Args:
        model: a sequence model of a kind :func:`patch_points` knows (run in eval mode, no gradients).
        tokens, source_tokens: 1-d token ids of one length ``T`` (position t patched from position t).
        target_position: where the prediction is read (default ``T - 1``); the target token ``y`` is the
            clean run's most likely next token there.
        metric: ``"logit_diff"`` (``z[y] - z[y']``, ``y'`` the corrupted run's most likely token other than
            ``y``), ``"kl"`` (KL(p_clean || p_patched) in bits) or ``"target_prob"`` (``p(y)``).
        batch: patched copies run in one forward pass (memory ``batch`` times one run's).
        first: the first position patched; earlier ones hold the corrupted value without a run (for texts
            that agree before ``first``, as a swapped token's do, patching there changes nothing).

    Returns a :class:`Sweep`, ``values`` ``(L, T)``. Positions after the target cannot change it (every kind is
    causal) and hold the corrupted value without a run. Each layer costs ``ceil((target + 1) / batch)``
    forward passes of ``batch`` copies. Raises ``ValueError`` for texts of different lengths, a target outside
    ``0..T-1`` or an unknown metric. Source: activation patching (Meng et al. 2022; Heimersheim & Nanda 2024,
    "logit difference" and "KL" metrics)."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    tok, src = _as_batch(tokens), _as_batch(source_tokens)
    T = tok.shape[1]
    if src.shape[1] != T:
        raise ValueError(f"a sweep patches position t from position t: lengths differ ({T}, {src.shape[1]})")
    p = T - 1 if target_position is None else int(target_position)
    if not 0 <= p < T:
        raise ValueError(f"target_position {p} outside 0..{T - 1}")
    if not 0 <= int(first) <= p:
        raise ValueError(f"first {first} outside 0..{p} (the target)")
    first = int(first)
    dev = _device(model)
    tok, src = tok.to(dev), src.to(dev)
    points = patch_points(model)
    start = time.perf_counter()
    values = np.empty((len(points), T))
    with _eval(model):
        # both runs read a patch point, so they share the patched runs' arithmetic (the LSTM's step loop)
        clean_logits = _cache_values(model, src, points[0])[0][0, p].float().cpu().numpy()
        corrupt_logits = _cache_values(model, tok, points[0])[0][0, p].float().cpu().numpy()
        clean_lp = log_softmax(clean_logits)
        y, y_alt = _tokens_weighed(clean_logits, corrupt_logits)
        clean_m = float(_metric(metric, clean_logits[None], clean_lp, y, y_alt)[0])
        calls = None
        for l, point in enumerate(points):
            if calls is None:
                calls = _calls(model, tok, point)
            corrupt_l, _ = _cache_values(model, tok, point)
            corrupt_m = float(_metric(metric, corrupt_l[0, p].float().cpu().numpy()[None], clean_lp, y, y_alt)[0])
            values[l, p + 1:] = corrupt_m
            values[l, :first] = corrupt_m
            _, source = _cache_values(model, src, point)
            source = {n: v[0] for n, v in source.items()}
            for lo in range(first, p + 1, batch):
                rows = torch.arange(lo, min(p + 1, lo + batch), device=dev)
                out = _run_patched(model, tok[:, :p + 1].expand(len(rows), -1), point, source, rows, calls)
                values[l, rows.cpu().numpy()] = _metric(metric, out[:, p].float().cpu().numpy(), clean_lp, y, y_alt)
        corrupt_m = float(_metric(metric, corrupt_logits[None], clean_lp, y, y_alt)[0])
    return Sweep(values=values, layers=[pt.label for pt in points], positions=np.arange(T), metric=metric,
                 clean=clean_m, corrupt=corrupt_m, target_position=p, target_token=y,
                 seconds=time.perf_counter() - start, runs=len(points) * (p + 1 - first), alt_token=y_alt)
