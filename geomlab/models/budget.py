"""The parameter-budget search: choosing a width so a model kind meets a parameter budget.

Every kind's ``config_for_budget`` (and through it :func:`geomlab.models.config_for_budget`, the zoo, the
report, the CLI and the app's live runs) goes through :func:`search_width`; :func:`linear_width_search` is
its shortcut for a width the count depends on linearly, :func:`search_knobs` the search over a kind's
discrete options, :func:`config_near_budget` the app's fallback to the nearest budget a kind can meet, and
:func:`resolve_config` the strict config of a budget or the default size, cached per process (runs, sweeps,
benchmarks).
Counts are effective parameters (:func:`geomlab.models.count_params`). Source: design choice.
"""

from __future__ import annotations

import itertools
import json
from typing import Any, Callable, Iterable

import torch

__all__ = ["search_width", "linear_width_search", "search_knobs", "config_near_budget", "resolve_config",
           "TOLERANCE"]

#: Relative distance from the budget a chosen config may have (5%).
TOLERANCE = 0.05


def search_width(make_config: Callable[[Any], dict[str, Any]], widths: Iterable, n_params: int, vocab_size: int,
                 tol: float = TOLERANCE, *, monotone: bool = False) -> dict[str, Any]:
    """The full config ``make_config(w)`` (over ``widths``) whose effective parameter count is nearest
    ``n_params`` (the first one on ties); ``ValueError`` naming the closest miss if none is within ``tol``.

    ``monotone=False``: every candidate is built on the CPU (cheap at these sizes; it draws from torch's
    global generator, as every build does). ``monotone=True`` (counts grow with the width): candidates are
    built on the ``meta`` device (no memory, no random draws) in increasing order, and the search stops
    once a count passes ``(1 + tol) n_params``.
    """
    from geomlab.models import build_model, count_params, full_config

    best, best_err = None, float("inf")
    for w in (sorted(widths) if monotone else widths):
        cfg = full_config({**make_config(w), "vocab_size": vocab_size})
        if monotone:
            with torch.device("meta"):
                n = count_params(build_model(cfg))
        else:
            n = count_params(build_model(cfg))
        err = abs(n - n_params) / n_params
        if err < best_err:
            best, best_err = cfg, err
        if monotone and n > (1 + tol) * n_params:
            break
    if best is None or best_err > tol:
        raise ValueError(f"no config within {tol:.0%} of {n_params} parameters (best off by {best_err:.1%})")
    return best


def linear_width_search(make_config: Callable[[int], dict[str, Any]], n_params: int,
                        vocab_size: int) -> dict[str, Any]:
    """:func:`search_width` over a width ``f`` on which the parameter count depends linearly (e.g. an MLP's
    ``d_ff``): the counts at ``f = 1, 2`` give the slope, then the five widths around the solution are
    searched. Raises ``ValueError`` if the budget cannot be met."""
    from geomlab.models import build_model, count_params, full_config

    n1, n2 = (count_params(build_model(full_config({**make_config(f), "vocab_size": vocab_size})))
              for f in (1, 2))
    if n2 <= n1:
        raise ValueError("width does not change the parameter count")
    f_star = max(1, round((n_params - n1) / (n2 - n1)) + 1)
    return search_width(make_config, range(max(1, f_star - 2), f_star + 3), n_params, vocab_size)


def search_knobs(kind: str, base: dict[str, Any], fixed: dict[str, Any], knobs, width: str,
                 widths: Callable[[dict[str, Any]], list], n_params: int, vocab_size: int) -> dict[str, Any]:
    """The first config, over the values of discrete options ``knobs`` (``[(key, values), ...]``: the value in
    ``base`` first, then the others in order, the last knob varying fastest; a key in ``fixed`` keeps its
    value), for which some ``width`` (over ``widths(config)``, or ``fixed[width]``) meets the budget
    (:func:`search_width`, monotone). Raises ``ValueError`` if none does."""
    options = []
    for key, values in knobs:
        if key in fixed:
            options.append([(key, fixed[key])])
        else:
            options.append([(key, v) for v in [base[key]] + [v for v in values if v != base[key]]])
    last: ValueError | None = None
    for combo in itertools.product(*options):
        cfg = {**base, **dict(combo)}
        ws = [fixed[width]] if width in fixed else widths(cfg)
        try:
            return search_width(lambda w, cfg=cfg: {**cfg, width: w}, ws, n_params, vocab_size, monotone=True)
        except ValueError as exc:
            last = exc
    raise ValueError(f"{kind}: no config within 5% of {n_params} parameters with {fixed or 'the defaults'}: "
                     f"{last}")


#: The budgets :func:`config_near_budget` tries when the asked one cannot be met: ±10%, ±20%, ... of it.
_NEAR_STEPS = (1, -1, 2, -2, 3, -3, 4, -4, 6, -6)


def config_near_budget(kind: str, n_params: int, vocab_size: int, **fixed: Any) -> tuple[dict[str, Any], str]:
    """``(config, note)``: :func:`geomlab.models.config_for_budget` of ``n_params``, or, when ``kind`` cannot
    meet it, of the nearest budget it meets in steps of 10% (up to ±60%; the note stays empty, the caller
    compares the built model's count). When none is met, or the kind has no budget rule, ``config`` is
    ``{"kind", "vocab_size", **fixed}`` (the defaults fill the rest) and ``note`` says why.
    Raises ``ValueError`` only for an unknown kind."""
    from geomlab.models import config_for_budget, model_class

    model_class(kind)  # ValueError naming the known kinds
    try:
        return config_for_budget(kind, int(n_params), vocab_size, **fixed), ""
    except NotImplementedError:
        return ({"kind": kind, "vocab_size": vocab_size, **fixed},
                f"{kind} has no parameter-budget rule; its default size is used")
    except ValueError as exc:
        for k in _NEAR_STEPS:
            try:
                return config_for_budget(kind, max(100, int(n_params * (1 + 0.1 * k))), vocab_size, **fixed), ""
            except (ValueError, NotImplementedError):
                continue
        return ({"kind": kind, "vocab_size": vocab_size, **fixed},
                f"budget not met ({exc}); the default size is used")


_CONFIG_CACHE: dict[str, dict[str, Any]] = {}


def resolve_config(kind: str, vocab_size: int, budget: int | None, config: dict[str, Any]) -> dict[str, Any]:
    """The full model config: ``config_for_budget(kind, budget, vocab_size, **config)`` when ``budget`` is
    given, else ``config`` completed with the kind's defaults. Results are cached per process (the budget
    searches build many candidate models); each call returns a fresh copy. Raises ``ValueError`` from the
    registry when no config meets the budget within 5%."""
    from geomlab.models import config_for_budget, full_config

    key = json.dumps([kind, int(vocab_size), budget, config], sort_keys=True, default=str)
    if key not in _CONFIG_CACHE:
        _CONFIG_CACHE[key] = (config_for_budget(kind, int(budget), int(vocab_size), **config) if budget else
                              full_config({**config, "kind": kind, "vocab_size": int(vocab_size)}))
    return dict(_CONFIG_CACHE[key])
