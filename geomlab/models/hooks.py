"""Hook points: the named places in a model's forward pass where a hidden value can be read or replaced.

A :class:`HookPoint` is an identity module that a model's ``forward`` calls on a value (``x = self.hook_x(x)``);
it is named by its module path (``blocks.0.hook_resid_post``) and documents the shape of what it sees. With
no function attached it returns its input and costs one Python call. Every recording in geomlab goes through
hook points: :func:`run_with_cache` collects the values, :func:`run_with_hooks` runs functions on them, and
``model.record`` (the trace contract) is built on :func:`run_with_cache`.

* A hook point may be called once per step of a recurrence (``per_step=True``: the LSTM's and the OSM-RNN's
  states, CEM's iterates); the cache stacks its calls on axis 1, after the batch axis, and a function sees each
  call's value with ``hook.step`` its index in the pass.
* Some hook points see a value computed only for them (``writable=False``: CEM's energies, Grassmann's
  norms before normalisation): a function there may read but not replace it (``ValueError``). Values that are
  only computed for an active hook cost nothing when none is attached.
* Every cached tensor has the batch on axis 0; the shape docs use ``B`` (batch), ``T`` (positions), ``S``
  (steps), ``H`` (heads) and the kind's widths.
* Functions attach to the model's own modules, so two runs of one model must not overlap in time (threads
  serialise them; :mod:`geomlab.trace` holds one lock around every model run).

Design choice after TransformerLens's ``HookPoint`` (Nanda et al.), written for geomlab.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, Union

import torch
from torch import nn

__all__ = ["HookPoint", "HookedModule", "hook_points", "hooks_attached", "run_with_hooks", "run_with_cache",
           "any_active"]

HookFn = Callable[[torch.Tensor, "HookPoint"], Union[torch.Tensor, None]]
Names = Union[Iterable[str], Callable[[str], bool], None]


class HookPoint(nn.Module):
    """An identity module at one value of a forward pass (design choice).

    Args:
        shape: the shape of the cached value, e.g. ``"(B, T, d_model)"`` (``per_step``: with the step axis
            ``S`` after the batch, as the cache holds it), plus a few words on what it is.
        per_step: called once per step of a recurrence; the cache stacks the calls on axis 1.
        writable: whether a function may return a replacement value (``False`` where the value is computed
            only to be read, so replacing it could not change the forward pass).

    ``name`` is the module path, set by :func:`hook_points`. ``step`` is the number of calls seen so far in
    the current run (the index of the call a function is looking at).
    """

    def __init__(self, shape: str, *, per_step: bool = False, writable: bool = True):
        super().__init__()
        self.shape, self.per_step, self.writable = shape, per_step, writable
        self.name = ""
        self.step = 0
        self._fns: list[HookFn] = []

    @property
    def active(self) -> bool:
        """Whether a function is attached (then the model computes what this hook point sees)."""
        return bool(self._fns)

    def __call__(self, value: torch.Tensor) -> torch.Tensor:
        # no nn.Module call machinery: an inactive hook point costs one Python call
        if not self._fns:
            return value
        for fn in self._fns:
            out = fn(value, self)
            if out is not None and out is not value:
                if not self.writable:
                    raise ValueError(f"hook point {self.name!r} is read-only: its value is computed only to "
                                     "be read, a replacement would change nothing")
                value = out
        self.step += 1
        return value

    def forward(self, value: torch.Tensor) -> torch.Tensor:
        return self(value)

    def extra_repr(self) -> str:
        return f"{self.shape}{', per step' if self.per_step else ''}{'' if self.writable else ', read-only'}"


class HookedModule:
    """Mixin of a module with hook points: :meth:`hook_points` lists them with their shapes (the contract)."""

    def hook_points(self) -> dict[str, str]:
        """``{name: shape doc}`` of every hook point of this model, in the order the modules are registered."""
        return {name: hp.shape for name, hp in hook_points(self).items()}


def hook_points(model: nn.Module) -> dict[str, HookPoint]:
    """Every :class:`HookPoint` under ``model`` by module path (names them on the way)."""
    out = {}
    for name, module in model.named_modules():
        if isinstance(module, HookPoint):
            module.name = name
            out[name] = module
    return out


def any_active(module: nn.Module) -> bool:
    """Whether a function is attached to a hook point under ``module`` (the list of hook points is cached)."""
    cached = module.__dict__.get("_hook_point_list")
    if cached is None:
        cached = [m for m in module.modules() if isinstance(m, HookPoint)]
        module.__dict__["_hook_point_list"] = cached
    return any(h._fns for h in cached)


def _select(points: dict[str, HookPoint], names: Names) -> list[str]:
    if names is None:
        return list(points)
    if callable(names):
        return [n for n in points if names(n)]
    names = list(names)
    unknown = [n for n in names if n not in points]
    if unknown:
        raise ValueError(f"unknown hook point(s) {unknown}; known: {', '.join(points)}")
    return names


@contextmanager
def hooks_attached(model: nn.Module, hooks: Iterable[tuple[str, HookFn]]) -> Iterator[dict[str, HookPoint]]:
    """Attach ``fn(value, hook)`` at each named hook point for the ``with`` block; every function is removed
    and every step counter reset on exit, also on an error. Raises ``ValueError`` for an unknown name."""
    points = hook_points(model)
    hooks = list(hooks)
    _select(points, [n for n, _ in hooks])
    attached: list[tuple[HookPoint, HookFn]] = []
    try:
        for name, fn in hooks:
            hp = points[name]
            hp.step = 0
            hp._fns.append(fn)
            attached.append((hp, fn))
        yield points
    finally:
        for hp, fn in attached:
            hp._fns.remove(fn)
            hp.step = 0


def run_with_hooks(model: nn.Module, tokens: torch.Tensor, hooks: Iterable[tuple[str, HookFn]] = (),
                   **kwargs: Any) -> Any:
    """``model(tokens, **kwargs)`` with ``fn(value, hook)`` run at each named hook point; a function that
    returns a tensor replaces the value and the forward pass continues from it (``None``: unchanged).

    Raises ``ValueError`` for an unknown name or a replacement at a read-only hook point. Design choice.
    """
    with hooks_attached(model, hooks):
        return model(tokens, **kwargs)


def run_with_cache(model: nn.Module, tokens: torch.Tensor, names: Names = None,
                   **kwargs: Any) -> tuple[Any, dict[str, torch.Tensor]]:
    """Run ``model(tokens, **kwargs)`` and return ``(output, cache)``: ``cache[name]`` the value each
    selected hook point saw, on the model's device (a ``per_step`` point: its calls stacked on axis 1).

    Args:
        model: a module with hook points; tokens: its input, ``(B, T)`` token ids for a sequence model
            (batched: every cached value has the batch on axis 0).
        names: the hook points to record: ``None`` (all), a list of names, or a predicate on the name.

    Only the selected hook points are active, so a model computes only the values they see. A hook point
    that ran no step is absent from the cache. Raises ``ValueError`` for an unknown name, ``RuntimeError``
    when a hook point that is not ``per_step`` was called more than once. Design choice.
    """
    points = hook_points(model)
    selected = _select(points, names)
    seen: dict[str, list[torch.Tensor]] = {n: [] for n in selected}

    def keep(value: torch.Tensor, hook: HookPoint) -> None:
        seen[hook.name].append(value)

    out = run_with_hooks(model, tokens, [(n, keep) for n in selected], **kwargs)
    cache = {}
    for name, values in seen.items():
        if not values:
            continue
        if points[name].per_step:
            cache[name] = torch.stack(values, dim=1)
        elif len(values) == 1:
            cache[name] = values[0]
        else:
            raise RuntimeError(f"hook point {name!r} ran {len(values)} times in one pass; declare it per_step")
    return out, cache
