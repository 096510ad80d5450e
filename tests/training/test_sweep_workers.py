"""Sweeps that keep their work (geomlab.training.sweep_workers): a worker killed mid-trial (SIGKILL) leaves its
trial RUNNING; the next worker fails it, retries it with the same parameters and the study ends with the
planned number of complete trials, on a journal file and on SQLite. Workers given one --sampler-seed
derive different seeds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

optuna = pytest.importorskip("optuna")

from geomlab.commands.cli import main  # noqa: E402
from geomlab.training import sweep_workers as workers  # noqa: E402
from geomlab.training.sweep_study import open_storage  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
NAME = "kill-test"


def _args(text_file, storage, n_trials: int, out) -> list[str]:
    """A tiny LSTM sweep whose trials take a few seconds each (300 steps of 4 x 16 characters)."""
    return ["sweep", "--model", "lstm", "--params", "5k", "--data", str(text_file), "--steps", "300",
            "--batch-size", "4", "--seq-len", "16", "--eval-every", "0", "--eval-tokens", "128", "--no-pruning",
            "--sampler", "random", "--sampler-seed", "0", "--threads", "1", "--study-name", NAME,
            "--storage", storage, "--out", str(out), "--n-trials", str(n_trials)]


def _trials(storage):
    try:
        return optuna.load_study(study_name=NAME, storage=open_storage(storage)).get_trials(deepcopy=False)
    except (KeyError, ValueError):  # the study is not made yet
        return []


def _kill_during_a_later_trial(proc, storage, timeout: float = 60.0) -> int:
    """SIGKILL ``proc`` once a trial after its first is running (the ones before it complete) and has
    recorded its worker; returns that trial's number. (Trial 1 or 2: a machine under load may read the
    storage only after trial 1 has ended.) The worker is frozen (SIGSTOP) and the storage read again before
    the kill: a trial that completed meanwhile is not the one killed (the worker goes on to the next)."""
    end = time.monotonic() + timeout

    def running_later(ts) -> bool:
        return (len(ts) >= 2 and ts[-1].state.name == "RUNNING" and all(t.state.name == "COMPLETE" for t in ts[:-1])
                and "worker" in ts[-1].user_attrs)

    while time.monotonic() < end and proc.poll() is None:
        if running_later(_trials(storage)):
            proc.send_signal(signal.SIGSTOP)
            ts = _trials(storage)
            if running_later(ts):
                proc.send_signal(signal.SIGKILL)
                proc.wait(10)
                return len(ts) - 1
            proc.send_signal(signal.SIGCONT)
        time.sleep(0.05)
    proc.kill()
    pytest.fail(f"the worker never ran a later trial (exit {proc.poll()}): {proc.stdout.read()[-2000:]}")


@pytest.mark.parametrize("backend", ["journal", "sqlite"])
def test_a_killed_workers_trial_is_failed_and_retried(backend, tmp_path, text_file, capsys):
    storage = str(tmp_path / "s.journal") if backend == "journal" else f"sqlite:///{tmp_path / 's.db'}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "geomlab", *_args(text_file, storage, 3, tmp_path / "out")],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    k = _kill_during_a_later_trial(proc, storage)
    before = _trials(storage)
    assert [t.state.name for t in before] == ["COMPLETE"] * k + ["RUNNING"]  # left running by the dead worker
    killed = before[k]
    assert killed.user_attrs["worker"]["pid"] == proc.pid

    # the next worker runs the rest of the plan: 3 trials, k done
    assert main(_args(text_file, storage, 3 - k, tmp_path / "out")) == 0
    out = capsys.readouterr().out
    assert f"trial(s) {k} of a dead worker: failed, and enqueued again" in out
    after = _trials(storage)
    states = [t.state.name for t in after]
    assert states.count("COMPLETE") == 3 and states[k] == "FAIL", states
    retry = next(t for t in after if t.system_attrs.get("failed_trial") == k)
    assert retry.state.name == "COMPLETE" and retry.params == killed.params
    assert retry.user_attrs["worker"]["pid"] == os.getpid()
    # the worker marked its registration ended; the dead one's is left, known dead
    regs = [v for k, v in optuna.load_study(study_name=NAME, storage=open_storage(storage)).user_attrs.items()
            if k.startswith(workers.WORKER_ATTR)]
    assert sorted(v["pid"] for v in regs) == sorted([proc.pid, os.getpid()])
    assert all(("ended" in v) == (v["pid"] == os.getpid()) and workers.is_gone(v) == (v["pid"] == proc.pid)
               for v in regs)


def test_is_gone_knows_dead_live_and_foreign_workers():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    me = workers.Worker()
    assert workers.is_gone({**me.record(), "pid": proc.pid, "start": None})
    assert not workers.is_gone(me.record())
    assert workers.is_gone({**me.record(), "start": (me.start or 0) + 1}) == (me.start is not None)  # pid reused
    assert not workers.is_gone({**me.record(), "pid": proc.pid, "host": "another-machine"})
    assert not workers.is_gone(None) and not workers.is_gone({"host": me.host, "pid": "x"})


def test_workers_with_one_sampler_seed_derive_different_seeds():
    study = optuna.create_study()
    a, b = workers.Worker(), workers.Worker()
    seed_a, note_a = workers.register(study, a, 7)
    seed_b, note_b = workers.register(study, b, 7)
    assert (seed_a, note_a) == (7, None)  # the only worker keeps the seed as given
    assert seed_b == workers.derive_seed(7, b.id) != 7 and "derived from --sampler-seed 7" in note_b
    # the derived sampler proposes other values than the base seed's
    first = [optuna.samplers.RandomSampler(seed=s).sample_independent(
        study, None, "lr", optuna.distributions.FloatDistribution(1e-4, 1e-1, log=True)) for s in (seed_a, seed_b)]
    assert first[0] != first[1]
    workers.unregister(study, a)
    workers.unregister(study, b)
    assert workers.register(study, workers.Worker(), 7) == (7, None)  # the others ended: the seed as given
    assert workers.register(study, workers.Worker(), None)[0] is None  # no seed given: Optuna's own


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
@pytest.mark.filterwarnings("ignore:Heartbeat of storage:UserWarning")  # ask() outside optimize, on purpose
def test_database_heartbeat_fails_and_retries_a_silent_trial(tmp_path, monkeypatch):
    from geomlab.training import sweep_study

    monkeypatch.setattr(sweep_study, "HEARTBEAT_S", 1)
    monkeypatch.setattr(sweep_study, "GRACE_S", 1)
    storage = open_storage(f"sqlite:///{tmp_path / 'h.db'}")
    study = optuna.create_study(storage=storage, study_name="hb")
    trial = study.ask({"lr": optuna.distributions.FloatDistribution(1e-4, 1e-1, log=True)})
    storage.record_heartbeat(trial._trial_id)  # a worker that beat once, then went silent (no liveness info)
    time.sleep(2.5)
    optuna.storages.fail_stale_trials(study)
    trials = study.get_trials(deepcopy=False)
    assert [t.state.name for t in trials] == ["FAIL", "WAITING"]
    assert trials[1].params == trials[0].params and trials[1].system_attrs["failed_trial"] == 0
