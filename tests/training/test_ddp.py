"""Data-parallel training (geomlab.training.distributed): `torchrun --nproc_per_node 2 -m geomlab train` on the CPU
(gloo) against one process with the same global batch, including a resume that every rank loads.

Tolerance (derivation). Both runs draw the same global batch (one generator, same seed) and start from the
same weights; two ranks each take half of its rows. Only the order of float32 arithmetic differs:

* the loss: one mean over the N = B*T = 64 targets against the mean of two means over 32 targets each; the
  LSTM's matrix products also see 2 rows instead of 4 and may sum in another order. A sum of n float32
  terms is within n*u relative of the exact sum (u = 2**-24 ~ 6.0e-8, the recursive-summation bound), and
  the sums here have n <= 64 (targets) and n <= 64 (the one-hot input of the ~47-symbol vocabulary, the 4 x
  12 gate rows), so the step-1 losses differ by at most about (64 + 64) * u ~ 7.6e-6 relative.
* the gradient: DDP all-reduces the two shard gradients and halves them (exact in binary), against one
  backward over the whole batch: the same bound holds for every entry, hence for the gradient norm.
* later steps: the weights differ by AdamW updates made from gradients that agree to that level, and over
  6 steps at lr 1e-2 the differences stay at that order (measured: at most 7.1e-8 relative, one unit in the
  last place, on the loss, the gradient norm and the validation BPC).

So the test asserts a relative tolerance of 1e-5 (the step-1 bound, rounded up). A wrong shard (the same
rows on both ranks) moves the step-1 loss by ~6e-3 relative, and gradients not averaged across ranks (no
DDP) move the step-1 gradient norm by ~2e-2: both fail (checked by breaking the code on purpose).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from geomlab.checkpoints import io as ckpt
from geomlab.commands.cli import main
from geomlab.training.distributed import Replicas

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
RTOL = 1e-5
#: Seconds one torchrun launch may take before it is killed (two tiny ranks take ~5-25 s on 2 busy cores).
LAUNCH_TIMEOUT = 240


def free_port() -> int:
    """A TCP port that was free a moment ago (bound to port 0, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(args: list[str], cwd: Path, nproc: int = 2, target: tuple[str, ...] = ("-m", "geomlab", "train")
             ) -> subprocess.CompletedProcess:
    """``torchrun --nproc_per_node nproc -m geomlab train ARGS`` (or another ``target``) on the CPU; the whole
    process group is killed after :data:`LAUNCH_TIMEOUT` seconds, so a hang cannot stall the suite."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "",
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc),
           "--master_addr", "127.0.0.1", "--master_port", str(free_port()), *target, *args]
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=LAUNCH_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"torchrun did not finish in {LAUNCH_TIMEOUT} s:\n{out}\n{err}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _args(text_file: Path, out: Path, steps: int) -> list[str]:
    return ["--model", "lstm", "--config", "hidden=12", "--data", str(text_file), "--steps", str(steps),
            "--batch-size", "4", "--seq-len", "16", "--lr", "1e-2", "--eval-every", "2", "--eval-tokens", "200",
            "--log-every", "1", "--device", "cpu", "--out", str(out), "--name", "run", "--quiet"]


def _compare(ddp: list[dict], single: list[dict]) -> None:
    assert [sorted(r) for r in ddp] == [sorted(r) for r in single]
    for a, b in zip(ddp, single):
        assert a["step"] == b["step"]
        if "loss" in a:
            assert a["lr"] == b["lr"]
            assert a["loss"] == pytest.approx(b["loss"], rel=RTOL), a["step"]
            assert a["grad_norm"] == pytest.approx(b["grad_norm"], rel=RTOL), a["step"]
        if "valid_bpc" in a:
            assert a["valid_bpc"] == pytest.approx(b["valid_bpc"], rel=RTOL), a["step"]


def test_shards_partition_the_global_batch():
    import torch

    x, y = torch.arange(24).reshape(6, 4), torch.arange(24).reshape(6, 4) + 100
    shards = [Replicas(r, 3).shard(x, y) for r in range(3)]
    assert torch.equal(torch.cat([s[0] for s in shards]), x) and torch.equal(torch.cat([s[1] for s in shards]), y)
    assert all(s[0].shape == (2, 4) for s in shards)
    assert Replicas().shard(x, y) == (x, y)
    with pytest.raises(ValueError, match="cannot be split evenly across 4 processes"):
        Replicas(0, 4).check_batch(6)
    Replicas(1, 3).check_batch(6)


def test_environment_and_devices(monkeypatch):
    import torch

    from geomlab.training import distributed

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert distributed.init_from_env() == Replicas()  # no torchrun: one process, no process group
    monkeypatch.setenv("WORLD_SIZE", "two")
    with pytest.raises(ValueError, match="WORLD_SIZE and LOCAL_RANK must be integers"):
        distributed.init_from_env()
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert Replicas(1, 2).place(torch.device("cuda")) == torch.device("cuda", 1)  # GPU LOCAL_RANK
    assert Replicas(1, 2).place(torch.device("cpu")) == torch.device("cpu")
    assert Replicas().place(torch.device("cuda")) == torch.device("cuda")
    with pytest.raises(ValueError, match="not on MPS"):
        Replicas(0, 2).place(torch.device("mps"))


def test_two_processes_match_one_with_the_same_global_batch(tmp_path, tiny_text, capsys):
    text_file = tmp_path / "small.txt"
    text_file.write_text(tiny_text * 3, encoding="utf-8")
    one, two, logs = tmp_path / "one", tmp_path / "two", tmp_path / "tb"

    # one process, in this process: 4 steps, then resumed to 6
    assert main(["train", *_args(text_file, one, 4)]) == 0
    assert main(["train", "--resume", str(one / "run"), "--data", str(text_file), "--steps", "6", "--quiet"]) == 0
    capsys.readouterr()

    # two processes: the same, each launch a fresh torchrun
    first = torchrun(_args(text_file, two, 4) + ["--log-dir", str(logs)], tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.stdout.count("done at step 4") == 1  # only rank 0 prints
    assert "x 2 processes" in first.stdout
    resumed = torchrun(["--resume", str(two / "run"), "--data", str(text_file), "--steps", "6", "--quiet",
                        "--log-dir", str(logs)], tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert resumed.stdout.count("resuming") == 1 and resumed.stdout.count("done at step 6") == 1

    single, ddp = ckpt.load(one / "run"), ckpt.load(two / "run")
    assert ddp.card["world_size"] == 2 and single.card["world_size"] == 1
    assert ddp.card["batch_size"] == single.card["batch_size"] == 4  # the global batch
    _compare(ddp.metrics, single.metrics)
    assert ddp.card["test_bpc"] == pytest.approx(single.card["test_bpc"], rel=RTOL)
    assert len(list(logs.glob("events.out.tfevents.*"))) == 2  # rank 0 only, once per launch
    assert not list(two.glob("*-2.json"))  # no rank but 0 wrote a checkpoint


STOP_SCRIPT = """
import gc, json, sys
from geomlab.training import distributed
from geomlab.data import LMTask, corpus_from_text
from geomlab.models import build_model
from geomlab.core.rng import seeded
from geomlab.training.trainer import Trainer

replicas = distributed.init_from_env()
task = LMTask(corpus_from_text(open(sys.argv[1], encoding="utf-8").read()))
with seeded(0):
    model = build_model({"kind": "lstm", "vocab_size": task.vocab_size, "hidden": 12})

def stop_on_rank_1(p):
    if p.event == "step" and p.step == 2 and replicas.rank == 1:
        trainer.stop()

trainer = Trainer(model, task, dict(steps=6, batch_size=4, seq_len=16, eval_every=0, log_every=1, device="cpu",
                                    eval_tokens=200), out=sys.argv[2], callback=stop_on_rank_1)
res = trainer.run()
with open(f"{sys.argv[2]}-rank{replicas.rank}.result", "w") as f:
    json.dump({"status": res.status, "step": res.step, "checkpoint": res.checkpoint is not None}, f)
# as `geomlab train` does (its trainer is a local of a function that has returned): nothing holding the
# model's DDP wrapper outlives the process group into the interpreter's exit, where gloo's threads freeing
# it could abort the process ("terminate called without an active exception")
del trainer, model, res
gc.collect()
distributed.shutdown()
"""


def test_a_stop_on_one_rank_stops_every_rank_at_the_same_step(tmp_path, tiny_text):
    """Rank 1 alone asks to stop after step 2; both ranks stop after step 3 (the request travels in step 3's
    all-reduce), neither waits forever, and only rank 0 saves."""
    import json

    text_file = tmp_path / "small.txt"
    text_file.write_text(tiny_text * 3, encoding="utf-8")
    script = tmp_path / "stop_one_rank.py"
    script.write_text(STOP_SCRIPT, encoding="utf-8")
    done = torchrun([str(text_file), str(tmp_path / "run")], tmp_path, target=(str(script),))
    assert done.returncode == 0, done.stderr[-3000:]
    results = [json.loads((tmp_path / f"run-rank{r}.result").read_text()) for r in (0, 1)]
    assert [r["status"] for r in results] == ["stopped", "stopped"]
    assert [r["step"] for r in results] == [3, 3]
    assert [r["checkpoint"] for r in results] == [True, False]
    assert ckpt.load(tmp_path / "run").card["steps"] == 3
