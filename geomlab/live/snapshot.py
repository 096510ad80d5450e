"""A live run's states and its progress as one consistent copy (:class:`Snapshot`), safe to read from any
thread: what the Train live page polls (:meth:`geomlab.live.run.LiveRun.snapshot`). Nothing here imports
streamlit."""

from __future__ import annotations

from dataclasses import dataclass

#: States of a run.
STATES = ("created", "running", "stopping", "stopped", "paused", "finished", "error")
ACTIVE_STATES = ("running", "stopping")


@dataclass(frozen=True)
class Snapshot:
    """A consistent copy of a run's progress, safe to read from any thread.

    state: one of :data:`STATES`. step/total: optimizer steps done / planned. loss: latest mean training
    loss (nats). metric_name/metric: the task's main validation metric (``bpc`` for text, ``accuracy`` for
    word problems) and its latest value. train_bpc: ``loss / ln 2`` for character text, else None.
    tokens_per_s: training targets per second (latest interval). eta_s: seconds left (estimate). elapsed_s:
    training seconds so far. history: list of dicts (``step``, ``loss``, ``train_bpc``, ``valid`` metrics,
    ``tokens_per_s``, ``elapsed_s``). message: human line for paused/error/finished/stopped. checkpoint:
    the run's last good (working) checkpoint path or None. saved: checkpoints saved by :meth:`LiveRun.save`.
    device: the device training runs on. note: remarks about the spec (budget not met...).
    """

    run_id: str
    state: str
    step: int
    total: int
    spec: dict
    loss: float | None = None
    metric_name: str = "loss"
    metric: float | None = None
    train_bpc: float | None = None
    tokens_per_s: float | None = None
    eta_s: float | None = None
    elapsed_s: float = 0.0
    history: tuple = ()
    message: str = ""
    checkpoint: str | None = None
    saved: tuple = ()
    device: str = ""
    note: str = ""
    params: int | None = None

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def fraction(self) -> float:
        return 0.0 if self.total <= 0 else max(0.0, min(1.0, self.step / self.total))

    @property
    def can_resume(self) -> bool:
        return self.state in ("stopped", "paused") and self.checkpoint is not None

    @property
    def can_save(self) -> bool:
        return self.state not in ("created", "error") or self.checkpoint is not None
