"""Random generators owned by one run, so runs in one process never share torch's global RNG.

torch draws dropout masks and initial weights from one process-wide generator. Two runs training in two
threads of one server (the app's live runs) then interleave their draws, and a seeded run is not
reproducible when another runs beside it. geomlab instead gives each run its own :class:`torch.Generator`
per device type (:class:`RunRNG`) and routes the randomness of the code it runs to them:

* **training** (:meth:`RunRNG.scope`): a thread-local ``TorchFunctionMode`` (torch keeps the mode stack per
  thread, so another thread's run is not affected) that

  - gives every random function or method that takes ``generator=`` (``torch.rand``, ``randn``, ``randint``,
    ``randperm``, ``bernoulli``, ``multinomial``, ``normal``, ``Tensor.uniform_``, ``normal_``,
    ``bernoulli_``, ``random_``, ``exponential_``, ..., every ``torch.nn.init`` function) the run's generator
    for that device when none is given;
  - computes ``torch.nn.functional.dropout`` (what ``nn.Dropout`` calls) from a ``bernoulli_`` mask drawn
    with the run's generator (the same arithmetic as torch's CPU kernel: ``input * mask / (1 - p)``, so a
    CPU run gives the numbers a process seeded with ``torch.manual_seed(seed)`` gave before);
  - computes recurrent layers with dropout between layers (``torch.lstm/gru/rnn_*``, what ``nn.LSTM`` etc.
    call) one layer at a time with that dropout in between, and ``scaled_dot_product_attention`` with
    ``dropout_p > 0`` by its reference formula with that dropout on the attention weights;
  - runs the rare functions that draw inside C++ without a ``generator`` argument (packed recurrent
    input with dropout, the other dropout variants, ``rrelu``, ``gumbel_softmax``, fractional max pooling,
    ``rand_like``...) under :data:`GLOBAL_RNG_LOCK` with torch's global generator temporarily holding the
    run's state (:func:`global_rng_as`), then hands the advanced state back to the run and restores the
    global one.

* **initialisation** (:func:`seeded`): model construction runs in the same scope with a fresh
  ``RunRNG(seed)``, so every init draw (``torch.randn``, ``nn.init.*``, ``Tensor.uniform_``...) is the one a
  process seeded with ``torch.manual_seed(seed)`` would make, whatever other threads draw meanwhile.

Promise: randomness drawn through these paths in a run never comes from (or changes) torch's global RNG;
only the rare swap path shares it, under the lock, so code outside geomlab drawing from the global RNG at
that instant without the lock could still disturb it. On CUDA, cuDNN's packed recurrent dropout keeps its
own cached state and is not covered. Source: design choice.
"""

from __future__ import annotations

import contextlib
import math
import threading
from typing import Any, Iterator

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

#: Held while torch's global generator temporarily carries a run's state (and while a model is built).
GLOBAL_RNG_LOCK = threading.RLock()

_T = torch.Tensor
#: Built-in random functions/methods that accept ``generator=`` (Python functions that take one, e.g.
#: ``torch.nn.init.*``, are recognised by the ``generator`` keyword they pass on).
_TAKES_GENERATOR = {
    torch.rand, torch.randn, torch.randint, torch.randperm, torch.bernoulli, torch.multinomial, torch.normal,
    torch.poisson, _T.uniform_, _T.normal_, _T.bernoulli_, _T.bernoulli, _T.random_, _T.exponential_,
    _T.geometric_, _T.log_normal_, _T.cauchy_, _T.multinomial,
}
_FACTORIES = {torch.rand, torch.randn, torch.randint, torch.randperm}
_RNN = {torch.lstm, torch.gru, torch.rnn_tanh, torch.rnn_relu}
#: Functions that draw inside C++ without a generator argument: run with the global generator swapped.
_SWAP_ALWAYS = {
    F.dropout1d, F.dropout2d, F.dropout3d, F.alpha_dropout, F.feature_alpha_dropout, F.rrelu, F.rrelu_,
    F.gumbel_softmax, F.fractional_max_pool2d, F.fractional_max_pool3d, torch.dropout, torch.dropout_,
    torch.feature_dropout, torch.feature_dropout_, torch.alpha_dropout, torch.alpha_dropout_,
    torch.feature_alpha_dropout, torch.feature_alpha_dropout_, torch.rrelu, torch.rrelu_, torch.randint_like,
    torch.rand_like, torch.randn_like,
}
for _name in ("fractional_max_pool2d_with_indices", "fractional_max_pool3d_with_indices"):
    if hasattr(F, _name):
        _SWAP_ALWAYS.add(getattr(F, _name))


_SPECIAL = _TAKES_GENERATOR | _RNN | _SWAP_ALWAYS | {F.dropout, F.scaled_dot_product_attention}


def _device_key(device: Any) -> str:
    dev = torch.device(device) if device is not None else torch.get_default_device()
    if dev.type == "cuda":
        return f"cuda:{dev.index if dev.index is not None else torch.cuda.current_device()}"
    return dev.type


class RunRNG:
    """The generators of one run: one ``torch.Generator`` per device (``"cpu"``, ``"cuda:0"``, ...), each
    seeded with ``seed`` when first used. :meth:`get_state` / :meth:`set_state` save and restore them all
    (the Trainer stores them in resumable checkpoints)."""

    def __init__(self, seed: int = 0):
        self.seed = int(seed)
        self._gens: dict[str, torch.Generator] = {}

    def generator(self, device: Any = "cpu") -> torch.Generator:
        """The run's generator for ``device`` (made and seeded on first use)."""
        key = _device_key(device)
        gen = self._gens.get(key)
        if gen is None:
            gen = torch.Generator(device=key if key != "cpu" else "cpu")
            gen.manual_seed(self.seed)
            self._gens[key] = gen
        return gen

    def get_state(self) -> dict[str, torch.Tensor]:
        """``{device: state}`` of every generator used so far (the CPU one always)."""
        self.generator("cpu")
        return {k: g.get_state() for k, g in self._gens.items()}

    def set_state(self, states: dict[str, torch.Tensor]) -> None:
        """Restore :meth:`get_state`'s result (devices this machine lacks are skipped)."""
        for key, state in states.items():
            if key.startswith("cuda") and not torch.cuda.is_available():
                continue
            self.generator(key).set_state(state)

    def scope(self) -> "_RunRNGMode":
        """Context manager: the current thread's random draws come from this run's generators."""
        return _RunRNGMode(self)


def draws_in_training(model: torch.nn.Module) -> bool:
    """Whether a forward pass of ``model`` in training mode draws random numbers: a dropout module with
    ``p > 0`` or a multi-layer recurrent module with dropout between layers (every random draw of geomlab's
    models goes through these). Training routes through :meth:`RunRNG.scope` only then: the mode costs a
    Python call per torch operation (measured +15 % per step on an OSM-RNN, whose recurrence is many small
    operations), which a model without dropout need not pay. Design choice."""
    for mod in model.modules():
        if isinstance(mod, torch.nn.modules.dropout._DropoutNd) and float(mod.p) > 0:
            return True
        if isinstance(mod, torch.nn.RNNBase) and float(mod.dropout) > 0 and mod.num_layers > 1:
            return True
    return False


@contextlib.contextmanager
def global_rng_as(rng: RunRNG, devices: tuple[str, ...] = ("cpu",)) -> Iterator[None]:
    """Hold :data:`GLOBAL_RNG_LOCK`, give torch's global generators (CPU, and the given CUDA devices) the
    states of ``rng``'s, run the block, hand the advanced states back to ``rng`` and restore the globals."""
    with GLOBAL_RNG_LOCK:
        saved = []
        for key in devices:
            glob = _global_generator(key)
            if glob is None:
                continue
            saved.append((key, glob, glob.get_state()))
            glob.set_state(rng.generator(key).get_state())
        try:
            yield
        finally:
            for key, glob, state in saved:
                rng.generator(key).set_state(glob.get_state())
                glob.set_state(state)


def _global_generator(key: str) -> torch.Generator | None:
    if key == "cpu":
        return torch.default_generator
    if key.startswith("cuda") and torch.cuda.is_available():
        idx = int(key.split(":")[1]) if ":" in key else torch.cuda.current_device()
        return torch.cuda.default_generators[idx]
    return None


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[RunRNG]:
    """Build a model reproducibly while other runs train or build: the current thread's draws come from a
    fresh ``RunRNG(seed)`` (the numbers ``torch.manual_seed(seed)`` would give); torch's global RNG is not
    used or changed. Yields the :class:`RunRNG`."""
    rng = RunRNG(seed)
    with rng.scope():
        yield rng


def _tensor_device(args, kwargs) -> Any:
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, torch.Tensor):
            return a.device
    return None


def _dropout(rng: RunRNG, input, p=0.5, training=True, inplace=False):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if p == 1.0:
        return input.mul_(0.0) if inplace else input * torch.zeros((), dtype=input.dtype, device=input.device)
    noise = torch.empty_like(input, memory_format=torch.contiguous_format)
    noise.bernoulli_(1.0 - p, generator=rng.generator(input.device))
    noise.div_(1.0 - p)
    return input.mul_(noise) if inplace else input * noise


def _rnn_layers(rng: RunRNG, func, args, kwargs):
    """A multi-layer ``torch.lstm/gru/rnn_*`` call with dropout, one layer at a time with :func:`_dropout`
    on each layer's output but the last (what torch's CPU implementation does, with its own RNG); ``None``
    for a layout this does not handle (packed input, keywords)."""
    if kwargs or len(args) != 9 or not isinstance(args[3], bool):
        return None
    x, hx, params, has_biases, layers, p, train, bidir, batch_first = args
    dirs = 2 if bidir else 1
    per = len(params) // (int(layers) * dirs)
    lstm = func is torch.lstm
    hs, cs = [], []
    for layer in range(int(layers)):
        rows = slice(layer * dirs, (layer + 1) * dirs)
        h0 = (hx[0][rows], hx[1][rows]) if lstm else hx[rows]
        out = func(x, h0, params[layer * dirs * per:(layer + 1) * dirs * per], has_biases, 1, 0.0, train,
                   bidir, batch_first)
        x = out[0]
        hs.append(out[1])
        if lstm:
            cs.append(out[2])
        if layer < int(layers) - 1:
            x = _dropout(rng, x, p, train)
    return (x, torch.cat(hs), torch.cat(cs)) if lstm else (x, torch.cat(hs))


def _sdpa(rng: RunRNG, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
          enable_gqa=False):
    """``scaled_dot_product_attention`` by its reference formula (torch's documentation), the dropout on
    the attention weights drawn with the run's generator."""
    L, S = query.size(-2), key.size(-2)
    scale_factor = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    bias = torch.zeros(L, S, dtype=query.dtype, device=query.device)
    if is_causal:
        keep = torch.ones(L, S, dtype=torch.bool, device=query.device).tril(diagonal=0)
        bias = bias.masked_fill(keep.logical_not(), float("-inf"))
    if attn_mask is not None:
        bias = (bias.masked_fill(attn_mask.logical_not(), float("-inf")) if attn_mask.dtype == torch.bool
                else attn_mask + bias)
    if enable_gqa:
        key = key.repeat_interleave(query.size(-3) // key.size(-3), -3)
        value = value.repeat_interleave(query.size(-3) // value.size(-3), -3)
    weights = torch.softmax(query @ key.transpose(-2, -1) * scale_factor + bias, dim=-1)
    return _dropout(rng, weights, dropout_p, True) @ value


def _rnn_draws(args) -> bool:
    """Whether a ``torch.lstm/gru/rnn_*`` call draws dropout masks (dropout > 0 and training)."""
    try:
        if isinstance(args[3], bool):  # (input, hx, params, has_biases, layers, dropout, train, ...)
            dropout, train = args[5], args[6]
        else:  # packed: (data, batch_sizes, hx, params, has_biases, layers, dropout, train, ...)
            dropout, train = args[6], args[7]
        return bool(train) and float(dropout) > 0.0
    except (IndexError, TypeError, ValueError):
        return True  # unknown layout: assume it draws (safe)


class _RunRNGMode(TorchFunctionMode):
    def __init__(self, rng: RunRNG):
        super().__init__()
        self.rng = rng

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func not in _SPECIAL and "generator" not in kwargs:  # the common case: one set lookup
            return func(*args, **kwargs)
        if func is F.dropout:
            return _dropout(self.rng, *args, **kwargs)
        if func in _TAKES_GENERATOR or ("generator" in kwargs and kwargs["generator"] is None):
            if kwargs.get("generator") is None:
                device = kwargs.get("device") if func in _FACTORIES else _tensor_device(args, kwargs)
                dev = torch.device(device) if device is not None else torch.get_default_device()
                if dev.type == "meta":  # shapes only (parameter counting): nothing is drawn
                    return func(*args, **kwargs)
                kwargs = {**kwargs, "generator": self.rng.generator(dev)}
            return func(*args, **kwargs)
        if func in _RNN and _rnn_draws(args):
            out = _rnn_layers(self.rng, func, args, kwargs)
            if out is not None:
                return out
            return self._swapped(func, args, kwargs)
        if func is F.scaled_dot_product_attention and _sdpa_draws(args, kwargs):
            return _sdpa(self.rng, *args, **kwargs)
        if func in _SWAP_ALWAYS:
            return self._swapped(func, args, kwargs)
        return func(*args, **kwargs)

    def _swapped(self, func, args, kwargs):
        device = _tensor_device(args, kwargs)
        keys = ("cpu",) + ((_device_key(device),) if device is not None and device.type == "cuda" else ())
        with global_rng_as(self.rng, keys):
            return func(*args, **kwargs)


def _sdpa_draws(args, kwargs) -> bool:
    p = kwargs.get("dropout_p", args[4] if len(args) > 4 else 0.0)
    try:
        return float(p) > 0.0
    except (TypeError, ValueError):
        return True
