"""``osm-rnn``: the orthogonal-state RNN ``H_{t+1} = H_t exp(Phi_t)`` (osm.md §3.1)."""

from __future__ import annotations

from typing import Any

import torch

from geomlab.geometry.groups import OrthogonalGroup, SpecialOrthogonalGroup, expm_taylor
from geomlab.models import register
from geomlab.models.family import OSM
from geomlab.models.osm.base import OSMBase, _budget_with_knobs
from geomlab.models.osm.config import PROTOTYPES, OSMRNNConfig
from geomlab.models.osm.geometry import _ct
from geomlab.models.osm.mixing import TangentMixing
from geomlab.models.osm.rnn_fast import fused_states, pad, padding_identity, skew_recurrence_forward


@register
class OSMRNN(OSMBase):
    """OSM-RNN (kind ``osm-rnn``): ``H_{t+1} = H_t exp(Phi_t)`` with ``H_0 = I`` (§3.1).

    ``Phi_t = Gamma(pull(H_t, M_{x_t}))`` (``rnn_input="pull"``, default: the state is pulled toward the
    current token along the geodesic-like direction of §2.2), optionally ``+ Gamma_tok(A_{x_t})``
    (``rnn_input="pull+token"``: the group product of token generators, §3.1 "richer choices"), both [I].
    Logits at ``t`` are the readout of ``H_{t+1}`` (after consuming ``x_t``), so they predict ``x_{t+1}``.

    Config: :class:`geomlab.models.osm.config.OSMRNNConfig`.
    Shapes: ``tokens (B, T) long -> logits (B, T, V) float32``. A loop over positions (the recurrence is
    sequential): in training mode on O/SO, float32, CPU, one fused autograd node with a hand-written backward
    (:mod:`geomlab.models.osm.rnn_fast`, issue 17); in eval mode and otherwise the reference loop of
    :meth:`_run`. Raises :class:`OSMConfigError` / ``GroupError`` (ValueErrors) for bad config.
    """

    kind = "osm-rnn"
    family = OSM
    recurrent = True
    config_class = OSMRNNConfig

    @classmethod
    def config_for_budget(cls, n_params: int, vocab_size: int, **fixed: Any) -> dict[str, Any]:
        """Vary ``d`` to meet the effective-parameter budget (±5%); keys in ``fixed`` are kept. If no ``d``
        fits with the defaults, the unfixed ``prototypes`` and then ``rnn_input`` are varied too (in that
        order of preference: e.g. 50K at V = 65 has no free-prototype ``d``: d = 17 gives 46.2K, d = 18
        54.5K, so it becomes d = 19 with group prototypes, 51.5K)."""
        knobs = [("prototypes", PROTOTYPES), ("rnn_input", ("pull", "pull+token"))]
        return _budget_with_knobs(cls, fixed, knobs, n_params, vocab_size)

    def __init__(self, config: OSMRNNConfig | dict[str, Any]):
        super().__init__(config)
        c = self.config
        self.mix = TangentMixing(c["mixing"], self.dim, c["step"])
        self.mix_tok = TangentMixing(c["mixing"], self.dim, c["token_step"]) if c["rnn_input"] == "pull+token" else None

    def _run(self, tokens: torch.Tensor, rec: dict | None) -> torch.Tensor:
        self._check_tokens(tokens)
        B, T = tokens.shape
        ref = self.token_coords if hasattr(self, "token_coords") else self.token_matrix
        if self._fused(ref.dtype, ref.device):
            return self._run_fused(tokens, rec)
        A = self._to_geo(self.token_generators())
        M = self._exp(A)
        H = self.geo.identity(B, dtype=M.dtype, device=ref.device)
        n, cplx = M.shape[-1], M.is_complex()
        # training on O/SO: the mixing's index-select path (a dim x dim matmul per step); eval mode keeps the
        # reference arithmetic, one dense F x F matmul per step (see OSMBase._exp)
        skew = isinstance(self.geo, (OrthogonalGroup, SpecialOrthogonalGroup)) and self.mix.mode == "linear"
        if skew and self.training:
            def mix(delta):
                return self.mix(delta, self.geo)
        else:  # one F x F matmul per step
            K = self.mix.dense(self.geo, n, M.dtype, M.device)
            flat = (lambda Z: torch.view_as_real(Z).reshape(B, -1)) if cplx else (lambda Z: Z.reshape(B, -1))
            unflat = ((lambda v: torch.view_as_complex(v.reshape(B, n, n, 2))) if cplx
                      else (lambda v: v.reshape(B, n, n)))

            def mix(delta):
                return unflat(flat(delta) @ K)
        drive = self.mix_tok(A, self.geo) if self.mix_tok is not None else None  # (V, n, n), once
        # the inputs of every step gathered once (one index and one backward instead of T), then unbound
        inputs = M[tokens].unbind(1)
        drives = drive[tokens].unbind(1) if drive is not None else None
        states, raws, phis = [], [], []
        for t in range(T):
            delta = _ct(H) @ inputs[t]
            phi = mix(delta)
            if drives is not None:
                phi = phi + drives[t]
            H = H @ self._exp(phi)
            states.append(H)
            if rec is not None:
                raws.append(self.geo.proj(delta))
                phis.append(phi)
        return self._finish(tokens, rec, M, states, raws, phis)

    def _fused(self, dtype: torch.dtype, device) -> bool:
        """Whether this forward takes :mod:`geomlab.models.osm.rnn_fast`: training mode, O/SO, the Taylor
        exponential, float32 on CPU (it reads one norm per step; other devices and dtypes keep the loop)."""
        return (self.training and isinstance(self.geo, (OrthogonalGroup, SpecialOrthogonalGroup))
                and self._exp_fast is expm_taylor and dtype == torch.float32 and device.type == "cpu")

    def _run_fused(self, tokens, rec) -> torch.Tensor:
        """The recurrence as one fused autograd node (design choice, issue 17): same mathematics as the loop
        of :meth:`_run`, the rounding of :func:`geomlab.models.osm.rnn_fast.skew_recurrence_forward`. Token
        matrices and group prototypes are exponentiated in one call; states run at the padded size
        ``diag(H, I)`` (:data:`geomlab.models.osm.rnn_fast.PAD_TO`), read out against ``diag(P, 0)``."""
        A = self.token_generators()
        V, n = A.shape[0], A.shape[-1]
        kind = self.config["prototypes"]
        gens = torch.cat([A, self.group.from_coords(self.proto_coords)]) if kind == "group" else A
        both = self._exp(pad(gens, group=False))  # exp(diag(A, 0)) = diag(exp A, I): the padded inputs directly
        Mp = both[:V]
        if kind in ("free", "support"):
            Pp = pad(self.free_prototypes(), group=False)
        else:  # group or tied prototypes: diag(P, I) - diag(0, I)
            Pp = (both[V:] if kind == "group" else Mp) - padding_identity(n, A.dtype, A.device)
        mix = self.mix
        W = mix.weight if mix.mode == "linear" else mix.eta * torch.eye(self.dim, dtype=A.dtype, device=A.device)
        Dv = pad(self.mix_tok(A, self.geo), group=False) if self.mix_tok is not None else None
        if rec is None:
            Hs = fused_states(Mp, tokens.T, W, Dv)  # (T, B, m, m), time-major
        else:
            got: dict = {}
            D = Dv[tokens.T] if Dv is not None else None
            Hs = skew_recurrence_forward(Mp[tokens.T], W, D, record=got)
            rec.update(states=Hs[:, 0, :n, :n][None], inputs=Mp[tokens[0], :n, :n],
                       tangents_raw=got["raw"][:, 0, :n, :n][None, None], tangents=got["phi"][:, 0, :n, :n][None, None])
        # the readout of diag(H, I) against diag(P, 0) is that of H against P: no copy of the top-left blocks
        return (self.tau * self.sim_scale * (Hs.flatten(-2) @ Pp.flatten(-2).mT) + self.bias).transpose(0, 1)

    def _finish(self, tokens, rec, M, states, raws, phis) -> torch.Tensor:
        Hs = torch.stack(states, dim=1)  # (B, T, n, n)
        logits = self.readout(Hs, M)
        if rec is not None:
            nat = self._to_native
            rec.update(states=nat(Hs[0])[None], inputs=nat(M[tokens[0]]),
                       tangents_raw=nat(torch.stack(raws, 1)[0])[None, None],
                       tangents=nat(torch.stack(phis, 1)[0])[None, None])
        return logits

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self._run(tokens, None)

    @torch.no_grad()
    def record(self, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
        """For ``tokens`` ``(1, T)``: ``states`` ``(1, T, d, d)`` (after consuming token t), ``inputs``
        ``(T, d, d)`` (token matrices), ``tangents_raw`` / ``tangents`` ``(1, 1, T, d, d)`` (pull before /
        after mixing; ``tangents`` is what was exponentiated), ``logits`` ``(T, V)``. See docs/architecture.md."""
        self._check_record(tokens)
        rec: dict[str, torch.Tensor] = {}
        rec["logits"] = self._run(tokens, rec)[0]
        return rec
