"""``geomlab bench gp``: CEM on Gaussian-process regression for several recursion depths T.

Trains one :class:`geomlab.models.cem.CEMRegressor` per T (same architecture and parameter count, same seed
and batches) on :class:`geomlab.data.gp.GPRegressionTask` (task ``gp``) through the one run spec
(:func:`geomlab.training.runs.run`), then prints
valid/test RMSE next to the exact GP posterior-mean floor, the RMSE by context length, the step time, and
whether the per-step energies of the trained model still fall (the CEM paper).
Writes a JSON summary with ``--json``.
"""

from __future__ import annotations

import math

import torch

from geomlab.bench import run_benchmark
from geomlab.core.argv import Parser, max_threads, number, threads


#: What the keys of the JSON (``--json``) mean; RMSEs are in the task's target units (function values).
DEFINITIONS = {
    "rows": "one trained model per --T",
    "T": "the model's recursion steps", "params": "its parameters (the same for every T)",
    "steps": "optimizer steps", "wall_s": "wall time of the whole run (training and evaluation), s",
    "s_per_step": "training time per optimizer step, evaluation excluded, s",
    "valid_rmse": "root-mean-square error of the predicted function values, valid split",
    "valid_mse": "valid_rmse squared", "valid_gp_rmse": "the exact GP posterior mean's RMSE on the same "
                                                        "points (the floor no model can beat on average)",
    "valid_tokens": "predicted points in the valid split",
    "test_rmse": "valid_rmse on the test split", "test_mse": "test_rmse squared",
    "test_gp_rmse": "valid_gp_rmse on the test split (the table's GP floor)",
    "test_tokens": "predicted points in the test split",
    "by_context": "test RMSE by context length (observed points): {'lo-hi': {'model': RMSE, 'gp': the floor's}}",
    "energy_fall_fraction": "share of the per-step energy changes that are decreases (8 valid sequences; 1 = the "
                            "energy always falls, as the CEM paper has it)",
    "final_displacement": "mean ||x^T - h|| / rho after the last recursion step (unitless)",
    "test_rmse_inference_T<t>": "test_rmse of the trained model run with t recursion steps (--test-T)",
}


def _energy_check(model, task, seq_len: int) -> dict[str, float]:
    """Fraction of (layer, block, step) token-mean energy changes that are decreases, over 8 valid sequences,
    and the mean final displacement ``||x^T - h|| / rho``."""
    es = task.eval_set("valid", seq_len)
    model.eval()
    falls, total, disp = 0, 0, []
    for i in range(8):
        rec = model.record(es["inputs"][i:i + 1])
        e = rec["energies"].mean(-1)  # (layer, block, step)
        d = e[..., 1:] - e[..., :-1]
        falls += int((d < 0).sum())
        total += d.numel()
        disp.append(float(rec["displacement"][:, :, -1].mean()))
    return {"energy_fall_fraction": falls / max(1, total), "final_displacement": sum(disp) / len(disp)}


def _rmse_by_context(model, task, seq_len: int, buckets=(1, 4, 16, 32)) -> dict[str, dict[str, float]]:
    es = task.eval_set("test", seq_len)
    pred = task.predict(model, es["inputs"])
    out = {}
    edges = list(buckets) + [seq_len + 1]
    for lo, hi in zip(edges[:-1], edges[1:]):
        sl = slice(lo - 1, hi - 1)  # token i has i+1 observed points (context = i + 1)
        out[f"{lo}-{hi - 1}"] = {
            "model": math.sqrt(float(((pred[:, sl] - es["targets"][:, sl]) ** 2).mean())),
            "gp": math.sqrt(float(((es["floor"][:, sl] - es["targets"][:, sl]) ** 2).mean())),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the exit status (0)."""
    from geomlab.training.config import recipe_option

    p = Parser(prog="geomlab bench gp", description=__doc__.split("\n\n")[0])
    p.add_argument("--T", type=number(int, 1, 1000), nargs="+", default=[1, 2, 4, 8],
                   help="recursion steps to compare, each 1 to 1,000 (default 1 2 4 8)")
    p.add_argument("--steps", type=recipe_option("steps"), default=600, help="optimizer steps per run (default 600)")
    p.add_argument("--batch-size", type=recipe_option("batch_size"), default=32, help="sequences per step "
                   "(default 32)")
    p.add_argument("--points", type=number(int, 2, 4097), default=64,
                   help="points per sequence J (tokens = J - 1), 2 to 4,097: the exact GP floor costs J**3 "
                   "(default 64)")
    p.add_argument("--d-model", type=number(int, 1, 2**16), default=32, help="width, 1 to 2**16 (default 32)")
    p.add_argument("--n-layers", type=number(int, 1, 1024), default=2, help="layers, 1 to 1,024 (default 2)")
    p.add_argument("--n-heads", type=number(int, 1, 1024), default=4, help="heads, 1 to 1,024 (default 4)")
    p.add_argument("--d-ff", type=number(int, 1, 2**20), default=64, help="feed-forward width, 1 to 2**20 "
                   "(default 64)")
    p.add_argument("--diagonal", default="shared", choices=["none", "shared", "per_head"],
                   help="the attention scores' diagonal part (diagonal-plus-low-rank): none, one shared by the "
                   "heads, or one per head (default shared)")
    p.add_argument("--lr", type=recipe_option("lr"), default=3e-3, help="peak learning rate (default 3e-3)")
    p.add_argument("--seed", type=recipe_option("seed"), default=0, help="seed, 0 to 2**63 - 1 (default 0)")
    p.add_argument("--n-eval", type=number(int, 1, 10**6), default=512,
                   help="sequences per evaluation split, 1 to 10**6 (default 512)")
    p.add_argument("--threads", type=threads, default=1, help=f"torch CPU threads, 1 to {max_threads()} (default 1)")
    p.add_argument("--test-T", type=number(int, 1, 1000), nargs="*", default=[],
                   help="also evaluate each trained model with these inference recursion steps (test-time "
                   "recursion, config key inference_recursion_steps; each 1 to 1,000)")
    return run_benchmark(p, argv, _measure, DEFINITIONS)


def _measure(args) -> dict:
    """Train and evaluate one model per T of ``args``; print the table; the rows (module docstring)."""
    from geomlab.training import runs
    from geomlab.models.cem import CEMRegressor
    from geomlab.core.rng import seeded

    torch.set_num_threads(args.threads)
    seq_len = args.points - 1
    spec = runs.RunSpec(kind="cem", params=None, data="gp", eval_sequences=args.n_eval, steps=args.steps,
                        batch_size=args.batch_size, seq_len=seq_len, lr=args.lr, seed=args.seed, device="cpu",
                        warmup=0.05, eval_every=0, log_every=50)
    task = runs.build_task(spec)
    rows = []
    for T in args.T:
        with seeded(args.seed):  # the numbers torch.manual_seed(seed) would give
            model = CEMRegressor({"d_model": args.d_model, "n_layers": args.n_layers, "n_heads": args.n_heads,
                                  "d_ff": args.d_ff, "recursion_steps": T, "diagonal": args.diagonal})
        n_params = sum(p.numel() for p in model.parameters())
        out = runs.run(spec, task=task, model=model)
        row = {"T": T, "params": n_params, "steps": args.steps, "wall_s": out.wall_s,
               "s_per_step": out.train_time_s / args.steps,  # training only, no evaluation
               **out.metrics,
               "by_context": _rmse_by_context(model, task, seq_len), **_energy_check(model, task, seq_len)}
        for t_inf in args.test_T:
            model.set_inference_steps(t_inf)
            row[f"test_rmse_inference_T{t_inf}"] = task.evaluate(model, "test", seq_len=seq_len)["rmse"]
        model.set_inference_steps(None)
        rows.append(row)
        print(f"T={T}: params {n_params}, valid RMSE {row['valid_rmse']:.4f}, test RMSE {row['test_rmse']:.4f} "
              f"(GP floor {row['test_gp_rmse']:.4f}), {row['s_per_step'] * 1000:.0f} ms/step, energy falls "
              f"{row['energy_fall_fraction']:.0%}, final displacement {row['final_displacement']:.2f}", flush=True)
    print("\n| T | params | valid RMSE | test RMSE | GP floor (test) | ms/step |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['T']} | {r['params']} | {r['valid_rmse']:.4f} | {r['test_rmse']:.4f} | "
              f"{r['test_gp_rmse']:.4f} | {r['s_per_step'] * 1000:.0f} |")
    print("\nRMSE by context length (test; model / GP floor):")
    for r in rows:
        print(f"T={r['T']}: " + ", ".join(f"{k}: {v['model']:.3f}/{v['gp']:.3f}"
                                          for k, v in r["by_context"].items()))
    if args.test_T:
        print("\nTest-time recursion (test RMSE with inference_recursion_steps):")
        for r in rows:
            print(f"trained T={r['T']}: " + ", ".join(f"T_inf={t}: {r[f'test_rmse_inference_T{t}']:.4f}"
                                                    for t in args.test_T))
    return {"rows": rows}


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
