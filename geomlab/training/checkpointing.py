"""What a :class:`geomlab.training.trainer.Trainer` saves and resumes from: the resumable checkpoint (weights,
optimizer moments, the batch and run generators, step, card, metrics history) written with
:func:`geomlab.checkpoints.io.save`, and the checks before a run is resumed from one.

A run stopped and resumed from its checkpoint gives identical results for the same seed (model, optimizer,
batch RNG, the run's own dropout RNG and step are saved). A checkpoint that cannot be written stops the run
(:class:`CheckpointWriteError`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Self

import torch

import geomlab
from geomlab.checkpoints import io as ckpt
from geomlab.data.tasks import Task
from geomlab.training.config import TrainConfig


class CheckpointWriteError(OSError):
    """A checkpoint could not be written (read-only folder, disk full...). The message names the step, the
    checkpoint and the reason; ``.step`` is the step, ``.errno`` the system's error number. The run stops
    (nothing is trained past a checkpoint that was not kept); the previous checkpoint on disk, if any, is
    what :func:`geomlab.checkpoints.io.save` left in place."""

    def __init__(self, message: str, step: int | None = None, errno_: int | None = None):
        super().__init__(message)
        self.step = step
        if errno_ is not None:
            self.errno = errno_


def optim_state_tensors(opt: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The optimizer's state as ``(tensors, json)``: ``optim.<param index>.<key>`` tensors (the moments, the
    step count) and ``{"param_groups": ...}`` (hyper-parameters), for a checkpoint."""
    sd = opt.state_dict()
    tensors = {}
    for idx, st in sd["state"].items():
        for k, v in st.items():
            if not isinstance(v, torch.Tensor):
                v = torch.tensor(v)
            tensors[f"optim.{idx}.{k}"] = v
    return tensors, {"param_groups": sd["param_groups"]}


def optim_state_from(tensors: dict[str, torch.Tensor], json_part: dict[str, Any]) -> dict[str, Any]:
    """The optimizer ``state_dict`` that :func:`optim_state_tensors` wrote (other tensors are ignored)."""
    state: dict[int, dict[str, torch.Tensor]] = {}
    for name, t in tensors.items():
        if not name.startswith("optim."):
            continue
        _, idx, key = name.split(".", 2)
        state.setdefault(int(idx), {})[key] = t
    groups = json_part["param_groups"]
    for g in groups:
        if "betas" in g:
            g["betas"] = tuple(g["betas"])
    return {"state": state, "param_groups": groups}


class Checkpointing:
    """The checkpoint half of :class:`~geomlab.training.trainer.Trainer` (a mixin: it reads and sets the
    trainer's ``model``, ``task``, ``config``, ``out``, ``card``, ``optimizer``, ``generator``, ``rng``,
    ``step``, ``elapsed_s``, ``last_valid``, ``history``, ``last_checkpoint``, ``device`` and ``replicas``, and
    builds the optimizer with its ``_make_optimizer``)."""

    @classmethod
    def from_checkpoint(cls, path: str | Path, task: Task, *, out: str | Path | None = None,
                        overrides: dict[str, Any] | None = None, **kwargs) -> Self:
        """Resume a run from a checkpoint written by :meth:`run` (it must hold the training state).

        ``out`` defaults to the checkpoint's own stem; ``overrides`` change config values (e.g. ``steps`` to
        extend a run: the cosine schedule then differs from an uninterrupted run; each change is kept on the card
        as ``resumed_with``: ``[{"step": STEP, KEY: VALUE, ...}]``). Raises
        :class:`geomlab.checkpoints.io.CheckpointError` if the checkpoint has no training state or its
        vocabulary differs from the task's, or if its training state's ``step`` is not a count (a negative or
        non-integer step: a corrupt or hand-edited checkpoint); ``ValueError`` if the run is already past the
        total ``steps`` asked for (resuming would rewrite a finished run with a smaller total). Nothing is
        written in either case.
        """
        c = ckpt.load(path)
        c.require_train_state()
        done = c.train_state["json"].get("step")
        if isinstance(done, bool) or not isinstance(done, int) or done < 0:
            raise ckpt.CheckpointError(f"{c.path.name} is corrupt: its training state says step {done!r}, not a "
                                       "step count (0 or more); nothing was trained or written")
        if task.vocab is not None and c.vocab is not None and task.vocab != c.vocab:
            raise ckpt.CheckpointError(f"{Path(path).name}: its vocabulary differs from the data's")
        # a task built with the checkpoint's vocabulary encodes any text; the data's own vocabulary says
        # whether it is the text the run was trained on (another one would train on unknown tokens)
        own = task.data_vocab() if hasattr(task, "data_vocab") else None
        if own is not None and c.vocab is not None:
            from geomlab.data.vocab import vocab_mismatch

            diff = vocab_mismatch(c.vocab, own)
            if diff:
                raise ckpt.CheckpointError(
                    f"not resuming {Path(path).name}: the data's vocabulary differs from the checkpoint's ({diff}); "
                    "resume with the text the run was trained on, or start a new run (nothing was trained or "
                    "written)")
        cfg = dict(c.train_config or {})
        cfg.update(overrides or {})
        if out is None:  # the checkpoint's own folder, or its flat pair's stem (a flat run stays flat)
            out = c.path if c.layout == "folder" else c.path.with_suffix("")
        # evaluation results belong to the step they were measured at: do not carry them over
        card = {k: v for k, v in c.card.items()
                if not k.startswith(("valid_", "test_")) and k != "eval_protocol"}
        changed = {k: v for k, v in (overrides or {}).items() if (c.train_config or {}).get(k) != v}
        if changed:  # the card keeps every change made on resumption (a zoo adoption refuses weight changes)
            card["resumed_with"] = list(card.get("resumed_with") or []) + [
                {"step": done, **changed}]
        config = TrainConfig.from_dict(cfg)
        if config.steps < done:
            raise ValueError(f"not resuming {c.path.name}: the run is already at step {done}, so {config.steps} "
                             f"steps in total would end before it (give more than {done} steps); the checkpoint "
                             "is left unchanged")
        trainer = cls(c.model, task, config, out=out, card=card, **kwargs)
        trainer._restore(c)
        if Path(out).resolve() == (c.path if c.layout == "folder" else c.path.with_suffix("")).resolve():
            trainer.last_checkpoint, trainer.last_checkpoint_step = c.path, done  # resumed in place: still there
        return trainer

    def _train_state(self) -> dict[str, Any]:
        """The resumable state :func:`geomlab.checkpoints.io.save` stores: tensors (optimizer moments,
        ``rng.batch``, ``rng.run.<device>``) and JSON (``param_groups``, ``step``, ``elapsed_s``, ``last_valid``)."""
        tensors, json_part = optim_state_tensors(self.optimizer)
        tensors["rng.batch"] = self.generator.get_state()
        for key, state in self.rng.get_state().items():  # the run's own generators (geomlab.core.rng)
            tensors["rng.run." + key.replace(":", ".")] = state
        json_part.update({"step": self.step, "elapsed_s": self.elapsed_s, "last_valid": self.last_valid})
        return {"tensors": tensors, "json": json_part}

    def _restore(self, c: ckpt.Checkpoint) -> None:
        """The optimizer, the batch and run generators, step, timing, last validation and metrics history from
        the training state of checkpoint ``c`` (what :meth:`_train_state` stored)."""
        ts, js = c.train_state["tensors"], c.train_state["json"]
        self.model.to(self.device)
        self.optimizer = self._make_optimizer()
        self.optimizer.load_state_dict(optim_state_from(ts, js))
        self.generator.set_state(ts["rng.batch"])
        states = {k[len("rng.run."):].replace(".", ":"): v for k, v in ts.items() if k.startswith("rng.run.")}
        if not states:  # no run generators (rng.run.*): torch's global RNG state becomes the run's generators
            states = {"cpu": ts["rng.torch"]}
            if "rng.cuda" in ts and self.device.type == "cuda":
                states[f"cuda:{self.device.index or 0}"] = ts["rng.cuda"]
        self.rng.set_state(states)
        self.step = int(js["step"])
        self.elapsed_s = float(js.get("elapsed_s", 0.0))
        self.last_valid = dict(js.get("last_valid") or {})
        self.history = list(c.metrics)

    def full_card(self, final_metrics: dict[str, float] | None = None) -> dict[str, Any]:
        """The checkpoint card for the current state (the given card, the task spec, the training recipe,
        parameter counts, step, timing and the torch CPU threads it ran with (``torch_threads``),
        ``final_metrics`` and ``eval_protocol``: the window ``seq_len`` and
        ``stride`` of a text, or the ``length`` and ``n_eval`` of a word problem's evaluation sequences);
        what :meth:`save_checkpoint` writes."""
        cfg = self.config
        card = dict(self.card)
        spec = self.task.spec()
        card.update({
            "task": spec, "corpus": spec.get("corpus", spec.get("name")),
            "split": spec.get("split_rule", "seeded evaluation sets" if self.task.kind != "lm" else ""),
            "steps": self.step,
            "total_steps": cfg.steps, "seed": cfg.seed, "batch_size": cfg.batch_size, "seq_len": cfg.seq_len,
            "train_time_s": round(self.elapsed_s, 3), "device": self.device.type,
            "world_size": self.replicas.world_size, "torch_threads": torch.get_num_threads(),
            "tokens_seen": cfg.tokens_through(self.step),
            "geomlab_version": geomlab.__version__,
        })
        # what the evaluation used: a word problem scores its own fixed sequences (their length and count,
        # whatever the training seq_len), a text windows of seq_len at the stride
        wp = spec.get("task") == "word-problem"
        proto = ({"length": spec.get("length"), "n_eval": spec.get("n_eval")} if wp else
                 {"seq_len": cfg.seq_len, "stride": cfg.eval_stride or cfg.seq_len})
        if final_metrics:
            card.update(final_metrics)
            card["eval_protocol"] = {**proto, "splits": "full"}
        elif self.last_valid:
            card.update({f"valid_{k}": v for k, v in self.last_valid.items()})
            card["eval_protocol"] = proto if wp else {**proto, "valid_tokens_max": cfg.eval_tokens}
        return card

    def save_checkpoint(self, final_metrics: dict[str, float] | None = None) -> Path | None:
        """Write the resumable checkpoint ``out`` (weights, optimizer/scheduler/RNG state, card, metrics)
        now: the folder ``out/`` (:mod:`geomlab.checkpoints.io`), or the flat pair ``out.json`` +
        ``out.safetensors`` when one is already there (a resumed flat run); returns its path (the folder
        or the JSON), or None when the trainer has no ``out``. Raises :class:`CheckpointWriteError`
        (an ``OSError``, one line naming the step, the checkpoint and the reason) when the system refuses."""
        if self.out is None:
            return None
        try:
            path = ckpt.save(self.out, self.model, self.task.vocab, self.full_card(final_metrics),
                             train_config=self.config.to_dict(), metrics=self.history,
                             train_state=self._train_state(), layout="auto")
        except OSError as exc:
            reason = exc.strerror or str(exc) or type(exc).__name__
            kept = (f"the last good checkpoint {self.last_checkpoint} is kept" if self.last_checkpoint
                    else "no checkpoint of this run was written")
            raise CheckpointWriteError(f"step {self.step}: could not write the checkpoint {self.out}: {reason}; "
                                       f"{kept}", self.step, exc.errno) from exc
        self.last_checkpoint, self.last_checkpoint_step = path, self.step
        return path
