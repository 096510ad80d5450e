"""``geomlab bench groups``: speed of ``MatrixGroup.exp`` and float32 drift of long products.

For each group (default O and U) and d in {4, 8, 16, 32}:

* ``exp fwd+bwd ratio``: best-of-``--repeats`` wall time (interleaved, alternating order) of ``loss = Re<W, g.exp(A)>; loss.backward()`` on a batch of
  ``--batch`` (default 4096) algebra elements, divided by the same with ``torch.linalg.matrix_exp`` measured in
  the same run (interleaved repeats). 1.0 means "as fast as matrix_exp"; < 1 is faster (T, O-block fast paths).
* ``drift``: ``||H^* H - I||_F`` (mean and max over ``--drift-batch`` chains) after ``--products`` (default 1000)
  right-multiplications ``H <- H exp(A_t)`` in float32/complex64 by random steps of norm ``--step`` (computed
  with ``--method``),
  without any reprojection; and the same after one final ``reproject``.

Source: Nunley, arXiv 2602.18417 (matrix_exp cost, drift). ``--quick`` shrinks the batch
for CI smoke runs. Times depend on the machine and its load; only the ratios are meant to be compared.
"""

from __future__ import annotations

import statistics
import time

import torch

from geomlab.bench import run_benchmark
from geomlab.core.argv import Parser, device_option, max_threads, name_list, number, number_list, threads
from geomlab.geometry.groups import EXP_METHODS, GROUP_NAMES, get_group
from geomlab.training.trainer import resolve_device

#: What the keys of the JSON (``--json``) mean; the table's header quotes ``ratio`` and ``drift_mean``.
DEFINITIONS = {
    "device": "where it ran (cpu, cuda:0, ...)",
    "rows": "one per group and d",
    "name": "the group (O, SO, U, SU, T, O-block)",
    "d": "matrix size: the group acts on d x d matrices",
    "batch": "algebra elements per timed exp call",
    "exp_s": "MatrixGroup.exp forward+backward on the batch, seconds, best of --repeats",
    "matrix_exp_s": "torch.linalg.matrix_exp forward+backward on the same batch, seconds, best of --repeats",
    "ratio": "exp_s / matrix_exp_s (forward+backward, same run); 1 = as fast as matrix_exp, below 1 faster",
    "ratio_median": "median exp time / median matrix_exp time over the same repeats (ratio uses the best)",
    "drift_mean": "||H^* H - I||_F after --products float32 products H <- H exp(A_t) without reprojection, mean "
                  "over --drift-batch chains (0 = still on the group; unitless)",
    "drift_max": "drift_mean's largest chain",
    "drift_after_reproject_max": "the largest drift once H is reprojected onto the group after the products",
}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _fwd_bwd(fn, A0: torch.Tensor, W: torch.Tensor, device: torch.device) -> float:
    A = A0.detach().clone().requires_grad_(True)
    _sync(device)
    t0 = time.perf_counter()
    H = fn(A)
    loss = (H.conj() * W).real.sum() if H.is_complex() else (H * W).sum()
    loss.backward()
    _sync(device)
    return time.perf_counter() - t0


def time_exp(g, batch: int, repeats: int, device: torch.device, seed: int = 0, method: str = "auto") -> dict:
    """Best-of-``repeats`` fwd+bwd seconds of ``g.exp`` and of ``torch.linalg.matrix_exp`` on the same inputs
    (the minimum is the estimate least affected by other load on a shared machine; the median is kept too)."""
    gen = torch.Generator(device=device).manual_seed(seed)
    c = torch.randn(batch, g.dim, generator=gen, device=device) / max(g.dim, 1) ** 0.5  # ||A||_F ~ 1
    A0 = g.from_coords(c)
    W = torch.randn(A0.shape, generator=gen, device=device, dtype=torch.float32)
    if g.is_complex:
        W = torch.complex(W, torch.randn(A0.shape, generator=gen, device=device, dtype=torch.float32))
    ours, base = [], []

    def exp(A):
        return g.exp(A, method=method)

    _fwd_bwd(exp, A0, W, device)  # warm-up
    _fwd_bwd(torch.linalg.matrix_exp, A0, W, device)
    for i in range(repeats):  # interleaved, order alternating, so load changes and order effects hit both
        if i % 2 == 0:
            ours.append(_fwd_bwd(exp, A0, W, device))
            base.append(_fwd_bwd(torch.linalg.matrix_exp, A0, W, device))
        else:
            base.append(_fwd_bwd(torch.linalg.matrix_exp, A0, W, device))
            ours.append(_fwd_bwd(exp, A0, W, device))
    t_ours, t_base = min(ours), min(base)
    return {
        "exp_s": t_ours,
        "matrix_exp_s": t_base,
        "ratio": t_ours / t_base,
        "ratio_median": statistics.median(ours) / statistics.median(base),
    }


def drift(g, batch: int, products: int, step: float, device: torch.device, seed: int = 1, method: str = "auto") -> dict:
    """``||H^* H - I||_F`` after ``products`` float32 right-multiplications by ``exp`` of random steps."""
    gen = torch.Generator(device=device).manual_seed(seed)
    pool = 64
    c = torch.randn(pool, g.dim, generator=gen, device=device)
    c = step * c / c.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    steps = g.exp(g.from_coords(c), method=method)  # float32 / complex64
    idx = torch.randint(0, pool, (products, batch), generator=gen, device=device)
    H = g.identity(batch, device=device)
    with torch.no_grad():
        for t in range(products):
            H = H @ steps[idx[t]]
    eye = torch.eye(g.d, dtype=H.dtype, device=device)

    def err(M):
        E = M.mH @ M - eye if M.is_complex() else M.mT @ M - eye
        return E.abs().square().sum((-2, -1)).sqrt()

    e, e_re = err(H), err(g.reproject(H))
    return {
        "drift_mean": float(e.mean()),
        "drift_max": float(e.max()),
        "drift_after_reproject_max": float(e_re.max()),
    }


def run(groups, dims, batch, repeats, products, drift_batch, step, device, block=4, method="auto") -> list[dict]:
    rows = []
    for name in groups:
        for d in dims:
            if name == "O-block":
                if d % block or d == block:
                    continue
                g = get_group(name, d, block=block)
            else:
                g = get_group(name, d)
            row = {"name": name, "d": d, "batch": batch}
            row.update(time_exp(g, batch, repeats, device, method=method))
            row.update(drift(g, drift_batch, products, step, device, method=method))
            rows.append(row)
            print(_format_row(row), flush=True)
    return rows


_HEADER = (
    f"{'group':<8} {'d':>3} {'batch':>6} {'exp fwd+bwd [s]':>16} {'matrix_exp [s]':>15} {'ratio':>6}"
    f" {'drift mean':>11} {'drift max':>10} {'max after reproject':>20}"
)


def _format_row(r: dict) -> str:
    label = r["name"] if r["name"] != "O-block" else "O-blk"
    return (
        f"{label:<8} {r['d']:>3} {r['batch']:>6} {r['exp_s']:>16.4f} {r['matrix_exp_s']:>15.4f} {r['ratio']:>6.2f}"
        f" {r['drift_mean']:>11.2e} {r['drift_max']:>10.2e} {r['drift_after_reproject_max']:>20.2e}"
    )


def main(argv: list[str] | None = None) -> int:
    """Command line; prints one row per group and d, and writes them with ``--json``. Returns 0."""
    p = Parser(prog="geomlab bench groups", description=__doc__.split("\n\n")[0])
    p.add_argument("--groups", type=name_list(GROUP_NAMES, "group"), default=["O", "U"],
                   help=f"comma list of group names ({','.join(GROUP_NAMES)}); default O,U")
    p.add_argument("--dims", type=number_list(int, 1, 1024), default=[4, 8, 16, 32],
                   help="comma list of d, each 1 to 1,024; default 4,8,16,32")
    p.add_argument("--batch", type=number(int, 1, 2**20), default=4096,
                   help="batch for the exp timing, 1 to 2**20 (default 4096)")
    p.add_argument("--repeats", type=number(int, 1, 10**4), default=4,
                   help="timed repeats per method (best of; 1 to 10,000; default 4)")
    p.add_argument("--method", default="auto", choices=EXP_METHODS, help="exp algorithm to time (default auto)")
    p.add_argument("--products", type=number(int, 1, 10**7), default=1000,
                   help="products for the drift measurement, 1 to 10**7 (default 1000)")
    p.add_argument("--drift-batch", type=number(int, 1, 2**20), default=256,
                   help="independent chains for the drift, 1 to 2**20 (default 256)")
    p.add_argument("--step", type=number(float, 0.0, 1000.0, above=True), default=0.1,
                   help="Frobenius norm of each random step, above 0, at most 1,000 (default 0.1)")
    p.add_argument("--block", type=number(int, 1, 1024), default=4, help="block size for O-block (default 4)")
    p.add_argument("--threads", type=threads, default=1, help=f"torch CPU threads, 1 to {max_threads()} (default 1)")
    p.add_argument("--device", type=device_option, default="cuda" if torch.cuda.is_available() else "cpu",
                   help="auto, cpu, cuda, cuda:N or mps (default cuda when this machine has it, else cpu)")
    p.add_argument("--quick", action="store_true",
                   help="CI smoke run: batch 64, 2 repeats, 100 products, 16 chains (overrides those options)")
    return run_benchmark(p, argv, _measure, DEFINITIONS)


def _measure(args) -> dict:
    """Time and drift of every group and d of ``args``; print the table; the rows and the device."""
    dev = resolve_device(args.device)  # one line when this machine lacks it, before any work
    if args.quick:
        args.batch, args.repeats, args.products, args.drift_batch = 64, 2, 100, 16
    torch.set_num_threads(args.threads)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # Nunley, arXiv 2602.18417
    print(
        f"# geomlab.bench groups: torch {torch.__version__}, device {dev}, threads {torch.get_num_threads()}, "
        f"exp method {args.method}, batch {args.batch}, repeats {args.repeats}; drift: {args.products} float32 "
        f"products of steps with ||A||_F = {args.step}, {args.drift_batch} chains\n# ratio: {DEFINITIONS['ratio']}"
        f"\n# drift: {DEFINITIONS['drift_mean']}"
    )
    print(_HEADER)
    rows = run(
        args.groups, args.dims, args.batch, args.repeats, args.products, args.drift_batch, args.step, dev,
        args.block, args.method
    )
    return {"device": str(dev), "rows": rows}
