"""The model registry: every model kind is built from a plain config dict.

``build_model({"kind": "osmformer", "vocab_size": 65, ...})`` returns a :class:`SequenceModel`; the dict is
converted once to the kind's typed config (:mod:`geomlab.models.config`).
Each family module registers its kinds with :func:`register`; this module imports them lazily
(``_FAMILIES``) so one broken family never hides the others, and imports no torch itself: the family
records (:mod:`geomlab.models.family`) can be read without loading a model.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from geomlab.models.base import SequenceModel

_REGISTRY: dict[str, type[SequenceModel]] = {}

# Modules that register kinds when imported (one concept per module).
_FAMILIES = (
    "geomlab.models.lstm",         # lstm
    "geomlab.models.transformer",  # transformer (pre-norm, ALiBi)
    "geomlab.models.llama",        # llama (RMSNorm, RoPE, SwiGLU)
    "geomlab.models.osm",          # osm-rnn, osmformer
    "geomlab.models.cem",          # cem
    "geomlab.models.grassmann",    # grassmann, grassmann-attn
    "geomlab.models.hf_gpt2",      # hf-gpt2 (GPT-2 of transformers; registered only when it is installed)
)
#: Libraries a kind's module may lack: without them the kind is not registered (the optional extras).
_OPTIONAL = ("transformers",)
_loaded = False


def register(cls: type[SequenceModel]) -> type[SequenceModel]:
    """Class decorator: register ``cls`` under ``cls.kind``. Raises ``ValueError`` on a duplicate kind."""
    if not cls.kind:
        raise ValueError(f"{cls.__name__} has no kind")
    if cls.kind in _REGISTRY and _REGISTRY[cls.kind] is not cls:
        raise ValueError(f"model kind {cls.kind!r} is registered twice")
    _REGISTRY[cls.kind] = cls
    return cls


def _load_families() -> None:
    global _loaded
    if _loaded:
        return
    for name in _FAMILIES:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            missing = (exc.name or "").split(".")[0]
            if exc.name != name and missing not in _OPTIONAL:  # a real missing dependency
                raise
    _loaded = True


def kinds() -> list[str]:
    """Sorted names of every registered model kind."""
    _load_families()
    return sorted(_REGISTRY)


def model_class(kind: str) -> type[SequenceModel]:
    """The class registered as ``kind``; ``ValueError`` naming the known kinds if unknown."""
    _load_families()
    if kind not in _REGISTRY:
        raise ValueError(f"unknown model kind {kind!r}; known kinds: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[kind]


def model_config(config: dict[str, Any]):
    """The typed config (the kind's ``config_class``, :mod:`geomlab.models.config`) of a plain dict with
    ``kind``, ``vocab_size`` and that kind's keys (the rest default). Raises ``ValueError`` on a missing
    kind/vocab_size, an unknown kind or key, or an invalid value."""
    if "kind" not in config:
        raise ValueError("model config needs a 'kind'")
    if "vocab_size" not in config:
        raise ValueError("model config needs a 'vocab_size'")
    return model_class(config["kind"]).config_class.from_dict(config)


def full_config(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` completed with its kind's defaults and validated (the dict checkpoints store). Raises
    ``ValueError`` on a missing kind/vocab_size, an unknown key or an invalid value."""
    return model_config(config).to_dict()


def build_model(config: dict[str, Any]) -> SequenceModel:
    """Build a model from a plain dict (``kind``, ``vocab_size`` and that kind's keys; the rest default).

    Raises ``ValueError`` for an unknown kind or key, or an invalid value.
    """
    cfg = model_config(config)
    return model_class(cfg.kind)(cfg)


def config_for_budget(kind: str, n_params: int, vocab_size: int, **fixed: Any) -> dict[str, Any]:
    """A full config of ``kind`` whose :func:`count_params` is within 5% of ``n_params``.

    Keys in ``fixed`` are kept as given; the kind chooses which width it varies (see its docstring; the search
    itself is :mod:`geomlab.models.budget`). Raises ``ValueError`` for a key the kind does not have (before any
    search) and if the budget cannot be met.
    """
    cls = model_class(kind)
    cls.config_class.check_keys(fixed)
    return cls.config_for_budget(int(n_params), int(vocab_size), **fixed)


def count_params(model: SequenceModel, which: str = "effective") -> int:
    """Number of parameters of ``model``.

    ``which="effective"``: trainable degrees of freedom (e.g. a d x d matrix that is only used through its
    skew part counts d(d-1)/2); ``which="stored"``: ``numel`` of every trainable tensor. Both are reported in
    checkpoint cards. Raises ``ValueError`` for another ``which``.
    """
    if which == "stored":
        return sum(p.numel() for p in model.parameters() if p.requires_grad)
    if which == "effective":
        return int(model.effective_param_count())
    raise ValueError(f"which must be 'effective' or 'stored', got {which!r}")


__all__ = [
    "SequenceModel", "register", "kinds", "model_class", "model_config", "full_config", "build_model",
    "config_for_budget", "count_params", "kinds_of",
]


def __getattr__(name: str) -> Any:
    """``SequenceModel`` on first use (it imports torch); ``AttributeError`` for any other missing name."""
    if name == "SequenceModel":
        from geomlab.models.base import SequenceModel

        return SequenceModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def kinds_of(family) -> list[str]:
    """The registered kinds of ``family`` (a :class:`~geomlab.models.family.Family` or its name), in
    registration order: the order of the modules in ``_FAMILIES``, then the order each module (a package:
    its ``__init__``) registers its classes in, whichever module was imported first."""
    name = getattr(family, "name", family)
    _load_families()
    found = [(i, k) for i, (k, cls) in enumerate(_REGISTRY.items()) if cls.family.name == name]
    return [k for _, k in sorted(found, key=lambda ik: (_module_rank(_REGISTRY[ik[1]]), ik[0]))]


def _module_rank(cls: type) -> int:
    """Index in ``_FAMILIES`` of the module that registers ``cls`` (after them all when none does)."""
    mod = cls.__module__
    return next((i for i, m in enumerate(_FAMILIES) if mod == m or mod.startswith(m + ".")), len(_FAMILIES))
