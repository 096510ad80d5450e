"""Tests for geomlab.training.trainer: schedule, resume equivalence, stop, NaN handling, progress, bpc, lstm sizing."""

from __future__ import annotations

import math
import threading

import pytest
import torch

from geomlab.checkpoints import io as ckpt
from geomlab.data import LMTask, corpus_from_text
from geomlab.data.word_problem import WordProblemTask
from geomlab.models import build_model, config_for_budget, count_params
from geomlab.training.trainer import (
    Progress, TrainConfig, Trainer, TrainingError, bpc, resolve_device,
)
from geomlab.training.sampling import generate


@pytest.fixture
def task(tiny_text):
    return LMTask(corpus_from_text(tiny_text * 3))


def _model(task, seed=0, **kw):
    torch.manual_seed(seed)
    return build_model({"kind": "lstm", "vocab_size": task.vocab_size, "hidden": 16, **kw})


CFG = dict(steps=12, batch_size=4, seq_len=16, eval_every=4, log_every=2, lr=1e-2, device="cpu",
           eval_tokens=200)


def test_lr_schedule():
    cfg = TrainConfig(steps=100, lr=1.0, warmup=10, min_lr_ratio=0.1)
    assert cfg.lr_at(1) == pytest.approx(0.1)
    assert cfg.lr_at(10) == pytest.approx(1.0)
    assert cfg.lr_at(100) == pytest.approx(0.1)
    assert cfg.lr_at(55) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5)))
    lrs = [cfg.lr_at(s) for s in range(10, 101)]
    assert all(a >= b for a, b in zip(lrs, lrs[1:]))
    assert TrainConfig(steps=50, warmup=0.1).warmup_steps() == 5
    with pytest.raises(ValueError):
        TrainConfig(steps=0)
    with pytest.raises(ValueError, match=r"^steps must be >= 1, got -5$"):  # not a curriculum message first
        TrainConfig(steps=-5)
    with pytest.raises(ValueError):
        TrainConfig(lr=float("nan"))
    assert TrainConfig(steps=4, warmup=4).lr_at(4) == pytest.approx(TrainConfig().lr)  # a warm-up as long as the run
    with pytest.raises(ValueError, match=r"warmup of 10 steps is longer than the run \(4 steps\)"):
        TrainConfig(steps=4, warmup=10)
    for bad in (float("nan"), float("inf"), -0.1):
        with pytest.raises(ValueError, match="finite numbers >= 0"):
            TrainConfig(warmup=bad)


def test_lm_batches_are_windows(task):
    g = torch.Generator().manual_seed(0)
    x, y = task.sample_batch(5, 10, g)
    assert x.shape == y.shape == (5, 10) and x.dtype == torch.long
    assert torch.equal(x[:, 1:], y[:, :-1])
    stream = task.tokens("train").tolist()
    for row_x, row_y in zip(x.tolist(), y.tolist()):
        full = row_x + row_y[-1:]
        assert any(stream[i:i + 11] == full for i in range(len(stream) - 10))


def test_run_progress_and_checkpoint(task, tmp_path):
    events: list[Progress] = []
    tr = Trainer(_model(task), task, TrainConfig(**CFG), out=tmp_path / "run", callback=events.append)
    res = tr.run()
    assert res.status == "done" and res.step == 12
    kinds = [e.event for e in events]
    assert kinds[0] == "start" and kinds[-1] == "done"
    assert kinds.count("eval") == 2  # steps 4 and 8; step 12 is the final evaluation
    steps = [e for e in events if e.event == "step"]
    assert [e.step for e in steps] == [2, 4, 6, 8, 10, 12]
    for e in steps:
        assert e.total == 12 and e.loss > 0 and e.train_bpc == pytest.approx(e.loss / math.log(2))
        assert e.tokens_per_s > 0 and e.eta_s >= 0 and e.lr > 0
    assert steps[-1].eta_s == 0
    assert steps[-1].valid_bpc is not None
    assert res.metrics["valid_bpc"] > 0 and res.metrics["test_bpc"] > 0
    c = ckpt.load(res.checkpoint)
    assert c.card["steps"] == 12 and c.card["test_bpc"] == pytest.approx(res.metrics["test_bpc"])
    assert c.card["valid_bpc"] == pytest.approx(bpc(c.model, task.tokens("valid"), CFG["seq_len"]))
    assert c.card["params_effective"] == count_params(c.model)
    assert c.train_config["seq_len"] == 16
    assert any(h.get("final") for h in c.metrics)


def test_training_reduces_loss(task):
    cfg = TrainConfig(**{**CFG, "steps": 60, "eval_every": 0})
    model = _model(task)
    before = bpc(model, task.tokens("valid"), 16)
    res = Trainer(model, task, cfg).run()
    assert res.metrics["valid_bpc"] < before - 0.5


def test_resume_is_identical(task, tmp_path):
    # dropout makes the global RNG matter too
    cfg = TrainConfig(**CFG)
    full = Trainer(_model(task, layers=2, dropout=0.3), task, cfg, out=tmp_path / "full").run()

    def stop_at_6(p: Progress):
        if p.event == "step" and p.step == 6:
            first.stop()

    first = Trainer(_model(task, layers=2, dropout=0.3), task, cfg, out=tmp_path / "part", callback=stop_at_6)
    res = first.run()
    assert res.status == "stopped" and res.step == 6
    assert ckpt.load(res.checkpoint).card["steps"] == 6
    second = Trainer.from_checkpoint(res.checkpoint, task)
    assert second.step == 6
    res2 = second.run()
    assert res2.status == "done" and res2.step == 12
    a, b = ckpt.load(full.checkpoint), ckpt.load(res2.checkpoint)
    for k, v in a.model.state_dict().items():
        assert torch.equal(v, b.model.state_dict()[k]), k
    assert res2.metrics["test_bpc"] == full.metrics["test_bpc"]
    losses_full = [h["loss"] for h in full.history if "loss" in h]
    losses_resumed = [h["loss"] for h in res2.history if "loss" in h]
    assert losses_full == losses_resumed


def test_run_again_after_stop_continues_identically(task):
    cfg = TrainConfig(**{**CFG, "eval_every": 0})
    full = Trainer(_model(task, layers=2, dropout=0.3), task, cfg)
    full.run()

    def stop_at_4(p):
        if p.event == "step" and p.step == 4:
            part.stop()

    part = Trainer(_model(task, layers=2, dropout=0.3), task, cfg, callback=stop_at_4)
    assert part.run().status == "stopped" and part.step == 4
    part.callbacks.clear()
    assert part.run().status == "done"
    for (k, a), b in zip(full.model.state_dict().items(), part.model.state_dict().values()):
        assert torch.equal(a, b), k


def test_stop_from_another_thread(task):
    started = threading.Event()

    def cb(p):
        if p.event == "step":
            started.set()

    tr = Trainer(_model(task), task, TrainConfig(**{**CFG, "steps": 100000, "log_every": 1}), callback=cb)
    th = threading.Thread(target=tr.run)
    th.start()
    assert started.wait(30)
    tr.stop()
    th.join(30)
    assert not th.is_alive()
    assert 0 < tr.step < 100000


class _NaNLossTask(LMTask):
    def __init__(self, corpus, bad_step):
        super().__init__(corpus)
        self.bad_step, self.calls = bad_step, 0

    def loss(self, outputs, targets):
        self.calls += 1
        loss = super().loss(outputs, targets)
        return loss * float("nan") if self.calls == self.bad_step else loss


def test_nan_loss_stops_cleanly(tiny_text, tmp_path):
    task = _NaNLossTask(corpus_from_text(tiny_text * 3), bad_step=7)
    events = []
    tr = Trainer(_model(task), task, TrainConfig(**CFG), out=tmp_path / "run", callback=events.append)
    with pytest.raises(TrainingError, match="step 7.*loss") as err:
        tr.run()
    assert err.value.step == 7 and err.value.quantity == "loss"
    assert events[-1].event == "failed" and "step 7" in events[-1].message
    # the last good checkpoint (step 4) is kept, valid and finite, and the message says which
    c = ckpt.load(tmp_path / "run")
    assert c.card["steps"] == 4
    assert str(err.value).endswith("; stopped; the last good checkpoint (step 4) is kept"), str(err.value)
    # raise_errors=False reports instead of raising; a run without a folder claims no checkpoint
    task2 = _NaNLossTask(corpus_from_text(tiny_text * 3), bad_step=2)
    res = Trainer(_model(task2), task2, TrainConfig(**CFG)).run(raise_errors=False)
    assert res.status == "failed" and res.error.step == 2 and res.checkpoint is None
    assert str(res.error).endswith("(non-finite); stopped"), str(res.error)
    # one that failed before its first checkpoint says none was written (nothing is on disk)
    task3 = _NaNLossTask(corpus_from_text(tiny_text * 3), bad_step=2)
    with pytest.raises(TrainingError) as err:
        Trainer(_model(task3), task3, TrainConfig(**CFG), out=tmp_path / "early").run()
    assert str(err.value).endswith("; stopped; no checkpoint of this run was written before it (the first "
                                   f"comes with the validation at step {CFG['eval_every']})"), str(err.value)
    assert not (tmp_path / "early" / "model.safetensors").exists()  # (its logs are there)
    # resumed in place from step 4 and diverging again, a run names the checkpoint it resumed from
    task4 = _NaNLossTask(corpus_from_text(tiny_text * 3), bad_step=1)
    with pytest.raises(TrainingError) as err:
        Trainer.from_checkpoint(tmp_path / "run", task4).run()
    assert str(err.value).endswith("the last good checkpoint (step 4) is kept"), str(err.value)


def test_nan_gradient_names_the_parameter(task, tmp_path):
    model = _model(task)
    calls = {"n": 0}

    def hook(grad):
        calls["n"] += 1
        return grad * float("nan") if calls["n"] == 5 else grad

    model.head.bias.register_hook(hook)
    with pytest.raises(TrainingError, match="gradient of parameter 'head.bias'") as err:
        Trainer(model, task, TrainConfig(**CFG), out=tmp_path / "run").run()
    assert err.value.step == 5
    assert ckpt.load(tmp_path / "run").card["steps"] == 4


def test_overflowing_gradient_norm_is_named(task, tmp_path):
    """Finite but huge gradients whose global norm overflows float32 get their own message (not a '?')."""
    model = _model(task)
    calls = {"n": 0}

    def hook(grad):
        calls["n"] += 1
        return torch.full_like(grad, 3e38) if calls["n"] == 3 else grad

    model.head.bias.register_hook(hook)
    with pytest.raises(TrainingError, match="gradient norm overflowed") as err:
        Trainer(model, task, TrainConfig(**CFG), out=tmp_path / "run").run()
    assert err.value.step == 3 and err.value.quantity == "gradient norm"


def test_an_exploding_but_finite_gradient_norm_stops_the_run(task, tmp_path):
    """A global gradient norm above EXPLODED_GRAD_NORM (every value finite; clipping would keep the updates
    finite while the model degrades to near-uniform predictions) stops the run as diverged at that step;
    one just below it trains on."""
    from geomlab.training.divergence import EXPLODED_GRAD_NORM

    for scale, fails in ((EXPLODED_GRAD_NORM * 10, True), (EXPLODED_GRAD_NORM / 10, False)):
        model = _model(task)
        calls = {"n": 0}

        def hook(grad, scale=scale):
            calls["n"] += 1
            if calls["n"] != 5:
                return grad
            return torch.full_like(grad, scale / grad.numel() ** 0.5)  # a norm of about `scale`

        model.head.bias.register_hook(hook)
        run = Trainer(model, task, TrainConfig(**CFG), out=tmp_path / f"run{fails}")
        if fails:
            with pytest.raises(TrainingError, match="gradient norm exploded") as err:
                run.run()
            assert err.value.step == 5 and err.value.quantity == "gradient norm"
            assert ckpt.load(tmp_path / f"run{fails}").card["steps"] == 4  # the last good checkpoint
        else:
            run.run()


def test_word_problem_task_trains(tmp_path):
    task = WordProblemTask("parity", length=16, n_eval=128)
    torch.manual_seed(0)
    model = build_model({"kind": "lstm", "vocab_size": task.vocab_size, "hidden": 32})
    cfg = TrainConfig(steps=400, batch_size=32, seq_len=16, lr=1e-2, warmup=0.05, eval_every=0, device="cpu")
    res = Trainer(model, task, cfg, out=tmp_path / "wp").run()
    assert res.metrics["valid_accuracy"] > 0.95
    c = ckpt.load(res.checkpoint)
    assert c.vocab.level == "symbol" and c.card["task"]["group"] == "parity"


def test_bpc_of_uniform_model_is_log2_vocab():
    class Uniform(torch.nn.Module):
        config = {"vocab_size": 8}

        def forward(self, tokens):
            return torch.zeros(*tokens.shape, 8)

    tokens = torch.randint(0, 8, (100,))
    assert bpc(Uniform(), tokens, 16) == pytest.approx(3.0)
    assert bpc(Uniform(), tokens, 16, stride=4) == pytest.approx(3.0)
    with pytest.raises(ValueError):
        bpc(Uniform(), tokens[:1], 16)


def test_generate(task):
    model = _model(task)
    prompt = task.vocab.encode("ROMEO:")
    a = generate(model, prompt, 20, temperature=1.0, seed=3, context=16, exclude=[task.vocab.unk_id])
    b = generate(model, prompt, 20, temperature=1.0, seed=3, context=16, exclude=[task.vocab.unk_id])
    assert a.shape == (20,) and torch.equal(a, b)
    assert task.vocab.unk_id not in a.tolist()
    greedy = generate(model, prompt, 5, temperature=0)
    assert greedy.tolist() == generate(model, prompt, 5, temperature=0, seed=9).tolist()
    with pytest.raises(ValueError):
        generate(model, prompt[:0], 5)
    for bad in ({"temperature": float("nan")}, {"temperature": float("inf")}, {"top_k": 0}, {"top_k": -2},
                {"context": 0}, {"seed": 2 ** 64}):
        with pytest.raises(ValueError, match="temperature|top_k|context|seed"):
            generate(model, prompt, 3, **bad)
    # any finite temperature samples: a tiny one is greedy, a huge one never picks an excluded token
    assert generate(model, prompt, 5, temperature=1e-300).tolist() == greedy.tolist()
    wide = generate(model, prompt, 50, temperature=1e308, seed=1, exclude=[task.vocab.unk_id])
    assert task.vocab.unk_id not in wide.tolist() and len(set(wide.tolist())) > 5


def test_resolve_device():
    assert resolve_device("cpu").type == "cpu"
    assert resolve_device("auto").type in ("cpu", "cuda", "mps")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA"):
            resolve_device("cuda")
    with pytest.raises(ValueError):
        resolve_device("quantum")


def test_lstm_sizing_matches_osm_notes():
    # Nunley, arXiv 2602.18417 (OSM paper notes §5.4): 4h(V+h) + 8h + hV + V; h=78, V=65 -> 50,375;
    # 32-dim embedding, h=88 -> 50,809
    m = build_model({"kind": "lstm", "vocab_size": 65, "hidden": 78})
    assert count_params(m) == 4 * 78 * (65 + 78) + 8 * 78 + 78 * 65 + 65 == 50_375
    m = build_model({"kind": "lstm", "vocab_size": 65, "hidden": 88, "embedding_dim": 32})
    assert count_params(m) == 50_809
    cfg = config_for_budget("lstm", 50_000, 65)
    assert cfg["hidden"] == 78
    cfg = config_for_budget("lstm", 100_000, 66, layers=2)
    n = count_params(build_model(cfg))
    assert cfg["layers"] == 2 and abs(n - 100_000) / 100_000 < 0.05
    with pytest.raises(ValueError):
        build_model({"kind": "lstm", "vocab_size": 65, "hidden": 0})


def test_lstm_dropout_acts_on_a_single_layer():
    """Dropout on the non-recurrent connections: one layer has it too (train mode differs from eval, p = 0 does
    not), and the stepped path (a state hook active) draws the same masks as the fused one."""
    from geomlab.models.hooks import run_with_hooks

    x = torch.randint(0, 10, (2, 12))
    m = build_model({"kind": "lstm", "vocab_size": 10, "hidden": 8, "dropout": 0.3}).train()
    torch.manual_seed(1)
    fused = m(x)
    torch.manual_seed(1)
    stepped = run_with_hooks(m, x, [("layers.0.hook_h", lambda t, hook: None)])
    assert torch.allclose(fused, stepped, atol=1e-5)
    assert not torch.allclose(fused, m.eval()(x), atol=1e-3)
    plain = build_model({"kind": "lstm", "vocab_size": 10, "hidden": 8}).train()
    assert torch.equal(plain(x), plain.eval()(x))


def test_weight_decay_that_acts_on_no_parameter_is_refused(task):
    """A weight decay the model exempts everywhere is a clear error, not a run equal to the undecayed one."""
    model = _model(task)
    model.no_weight_decay = {n for n, _ in model.named_parameters()}
    with pytest.raises(ValueError, match="no parameter"):
        Trainer(model, task, TrainConfig(**{**CFG, "weight_decay": 0.1}))
    Trainer(model, task, TrainConfig(**CFG))  # no decay asked: fine


def test_lstm_is_causal():
    m = build_model({"kind": "lstm", "vocab_size": 10, "hidden": 8})
    x = torch.randint(0, 10, (2, 12))
    y = x.clone()
    y[:, 7:] = (y[:, 7:] + 1) % 10
    assert torch.allclose(m(x)[:, :7], m(y)[:, :7])
    rec = m.record(x[:1])
    assert torch.allclose(rec["logits"], m(x[:1])[0], atol=1e-6)


def test_from_checkpoint_errors(task, tmp_path, tiny_text):
    model = _model(task)
    ckpt.save(tmp_path / "weights_only", model, task.vocab, {})
    with pytest.raises(ckpt.CheckpointError, match="no training state .*cannot resume from it; start a new run"):
        Trainer.from_checkpoint(tmp_path / "weights_only", task)
    res = Trainer(model, task, TrainConfig(**{**CFG, "steps": 2}), out=tmp_path / "run").run()
    other = LMTask(corpus_from_text("completely different alphabet 0123456789 " * 5))
    with pytest.raises(ckpt.CheckpointError, match="vocabulary"):
        Trainer.from_checkpoint(res.checkpoint, other)


def test_length_curriculum_schedule_and_validation():
    cfg = TrainConfig(steps=10, batch_size=3, seq_len=16, length_curriculum=[(2, 3), (4, 2)])
    assert [cfg.seq_len_at(s) for s in range(1, 11)] == [2, 2, 2, 4, 4, 16, 16, 16, 16, 16]
    assert cfg.tokens_through(0) == 0
    assert cfg.tokens_through(4) == 3 * (2 * 3 + 4)
    assert cfg.tokens_through(10) == 3 * (2 * 3 + 4 * 2 + 16 * 5)
    assert TrainConfig.from_dict(cfg.to_dict()).length_curriculum == ((2, 3), (4, 2))  # survives JSON
    assert TrainConfig(steps=5, seq_len=8).tokens_through(5) == 5 * 32 * 8  # no curriculum: plain product
    with pytest.raises(ValueError, match="more than steps"):
        TrainConfig(steps=4, length_curriculum=[(2, 3), (4, 2)])
    with pytest.raises(ValueError, match=">= 1"):
        TrainConfig(steps=4, length_curriculum=[(0, 2)])
    with pytest.raises(ValueError, match="pairs"):
        TrainConfig(steps=4, length_curriculum=[3])
    with pytest.raises(ValueError, match="at most seq_len"):
        TrainConfig(steps=4, seq_len=8, length_curriculum=[(64, 2)])


def test_trainer_follows_the_length_curriculum(tmp_path):
    """The batches the trainer draws have the curriculum's lengths, then seq_len; the card counts the
    tokens actually seen."""
    task = WordProblemTask("S3", length=8, n_eval=16)
    seen: list[int] = []
    real = task.sample_batch

    def spy(batch_size, seq_len, generator):
        seen.append(seq_len)
        return real(batch_size, seq_len, generator)

    task.sample_batch = spy
    torch.manual_seed(0)
    model = build_model({"kind": "lstm", "vocab_size": task.vocab_size, "hidden": 8})
    cfg = TrainConfig(steps=6, batch_size=2, seq_len=8, eval_every=0, device="cpu", final_eval=False,
                      length_curriculum=[(2, 2), (4, 1)])
    trainer = Trainer(model, task, cfg, out=None)
    trainer.run()
    assert seen[:6] == [2, 2, 4, 8, 8, 8] and all(n == 8 for n in seen[6:])  # then evaluation sets
    assert trainer.full_card()["tokens_seen"] == 2 * (2 * 2 + 4 + 8 * 3)


def test_resume_reads_a_checkpoint_that_saved_the_global_rng(task, tmp_path):
    """A checkpoint without the run's generators holds torch's global RNG state (``rng.torch``): it becomes
    the run's own CPU generator state, so such a run resumes identically."""
    cfg = TrainConfig(**{**CFG, "eval_every": 0})
    full = Trainer(_model(task, layers=2, dropout=0.3), task, cfg, out=tmp_path / "full").run()

    def stop_at_6(p):
        if p.event == "step" and p.step == 6:
            part.stop()

    part = Trainer(_model(task, layers=2, dropout=0.3), task, cfg, out=tmp_path / "part", callback=stop_at_6)
    res = part.run()
    c = ckpt.load(res.checkpoint)
    tensors = dict(c.train_state["tensors"])
    tensors["rng.torch"] = tensors.pop("rng.run.cpu")
    old = ckpt.save(tmp_path / "old", c.model, c.vocab, c.card, train_config=c.train_config, metrics=c.metrics,
                    train_state={"tensors": tensors, "json": c.train_state["json"]})
    resumed = Trainer.from_checkpoint(old, task).run()
    a, b = ckpt.load(full.checkpoint).model.state_dict(), ckpt.load(resumed.checkpoint).model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
