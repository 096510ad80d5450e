"""``osm-rnn``: the orthogonal-state RNN ``H_{t+1} = H_t exp(Phi_t)`` (Nunley, arXiv 2602.18417)."""

from __future__ import annotations

from typing import Any

import torch

from geomlab.geometry.groups import OrthogonalGroup, SpecialOrthogonalGroup, expm_taylor
from geomlab.models import register
from geomlab.models.family import OSM
from geomlab.models.base import LensStage
from geomlab.models.hooks import HookPoint, any_active
from geomlab.models.osm.base import OSMBase, _budget_with_knobs
from geomlab.models.osm.config import PROTOTYPES, OSMRNNConfig
from geomlab.models.osm.geometry import _ct
from geomlab.models.osm.mixing import TangentMixing
from geomlab.models.osm.rnn_fast import fused_states, pad, padding_identity, skew_recurrence_forward


@register
class OSMRNN(OSMBase):
    """OSM-RNN (kind ``osm-rnn``): ``H_{t+1} = H_t exp(Phi_t)`` with ``H_0 = I``.

    ``Phi_t = Gamma(pull(H_t, M_{x_t}))`` (``rnn_input="pull"``, default: the state is pulled toward the
    current token along the geodesic-like direction of), optionally ``+ Gamma_tok(A_{x_t})``
    (``rnn_input="pull+token"``: the group product of token generators, a richer choice), both [I].
    Logits at ``t`` are the readout of ``H_{t+1}`` (after consuming ``x_t``), so they predict ``x_{t+1}``.

    Config: :class:`geomlab.models.osm.config.OSMRNNConfig`.
    Shapes: ``tokens (B, T) long -> logits (B, T, V) float32``. A loop over positions (the recurrence is
    sequential): in training mode on O/SO, float32, CPU, one fused autograd node with a hand-written backward
    (:mod:`geomlab.models.osm.rnn_fast`; its hook points are read-only); in eval mode and otherwise
    the reference loop of :meth:`forward`. Raises :class:`OSMConfigError` / ``GroupError`` (ValueErrors) for bad
    config.

    Hook points (``model.hook_points()``), in the arithmetic representation (``n = d``; ``2d``, real, for
    ``complex_mode="real"``; complex for native U/SU/T): ``hook_inputs`` ``(B, T, n, n)`` (token matrices);
    per step t: ``hook_tangent_raw`` ``(B, T, n, n)`` (the pull before the mixing), ``hook_tangent``
    ``(B, T, n, n)`` (``Phi_t``), ``hook_state`` ``(B, T, n, n)`` (``H_{t+1}``; a replacement carries on).
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
        self.hook_inputs = HookPoint("(B, T, n, n) token matrices M_{x_t} of the inputs")
        self.hook_tangent_raw = HookPoint("(B, T, n, n) pull proj(H_t^* M_{x_t}) before the mixing (computed "
                                          "only for the hook; a replacement is mixed instead)", per_step=True)
        self.hook_tangent = HookPoint("(B, T, n, n) Phi_t after the mixing: what is exponentiated", per_step=True)
        self.hook_state = HookPoint("(B, T, n, n) state H_{t+1} = H_t exp(Phi_t) after token t", per_step=True)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        self._check_tokens(tokens)
        B, T = tokens.shape
        ref = self.token_coords if hasattr(self, "token_coords") else self.token_matrix
        if self._fused(ref.dtype, ref.device):
            return self._run_fused(tokens)
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
        inputs = self.hook_inputs(M[tokens]).unbind(1)
        drives = drive[tokens].unbind(1) if drive is not None else None
        raw_hook, states = self.hook_tangent_raw, []
        for t in range(T):
            delta = _ct(H) @ inputs[t]
            if raw_hook.active:  # the pull is projected only to be seen; a replacement is mixed instead
                raw = self.geo.proj(delta)
                seen = raw_hook(raw)
                delta = delta if seen is raw else seen
            phi = mix(delta)
            if drives is not None:
                phi = phi + drives[t]
            phi = self.hook_tangent(phi)
            H = self.hook_state(H @ self._exp(phi))
            states.append(H)
        return self.readout(torch.stack(states, dim=1), M)

    def _fused(self, dtype: torch.dtype, device) -> bool:
        """Whether this forward takes :mod:`geomlab.models.osm.rnn_fast`: training mode, O/SO, the Taylor
        exponential, float32 on CPU (it reads one norm per step; other devices and dtypes keep the loop)."""
        return (self.training and isinstance(self.geo, (OrthogonalGroup, SpecialOrthogonalGroup))
                and self._exp_fast is expm_taylor and dtype == torch.float32 and device.type == "cpu")

    def _run_fused(self, tokens) -> torch.Tensor:
        """The recurrence as one fused autograd node (design choice): same mathematics as the loop
        of :meth:`forward`, the rounding of :func:`geomlab.models.osm.rnn_fast.skew_recurrence_forward`. Token
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
        Hs = fused_states(Mp, tokens.T, W, Dv)  # (T, B, m, m), time-major
        if any_active(self):
            self._observe_fused(tokens, Mp, W, Dv, Hs, n)
        # the readout of diag(H, I) against diag(P, 0) is that of H against P: no copy of the top-left blocks
        return (self.tau * self.sim_scale * (Hs.flatten(-2) @ Pp.flatten(-2).mT) + self.bias).transpose(0, 1)

    @torch.no_grad()
    def _observe_fused(self, tokens, Mp, W, Dv, Hs, n: int) -> None:
        """Pass the fused recurrence's values to the hook points, after the fact: its pulls and tangents come
        from the same loop (:func:`~geomlab.models.osm.rnn_fast.skew_recurrence_forward`, whose states equal
        ``Hs`` bit for bit). The fused recurrence cannot continue from a replaced value: ``ValueError`` then
        (eval mode runs the step-by-step loop, where every hook point is writable)."""
        got: dict = {}
        skew_recurrence_forward(Mp[tokens.T], W, Dv[tokens.T] if Dv is not None else None, record=got)
        steps = [(self.hook_inputs, Mp[tokens][..., :n, :n])]
        for t in range(tokens.shape[1]):
            steps += [(self.hook_tangent_raw, got["raw"][t, :, :n, :n]), (self.hook_tangent, got["phi"][t, :, :n, :n]),
                      (self.hook_state, Hs[t, :, :n, :n])]
        for hook, value in steps:
            if hook(value) is not value:
                raise ValueError(f"{hook.name}: the fused training recurrence (O/SO, float32, CPU) cannot continue "
                                 "from a replaced value; replace values in eval mode")

    def lens_stages(self) -> list[LensStage]:
        """One stage: the state sequence ``H_{t+1}`` through the prototype readout (the model's output)."""
        M = self.token_matrices()
        return [LensStage("state", "hook_state", lambda H: self.readout(H, M))]

    def record_hooks(self) -> list[str]:
        """The inputs, the tangents and the states."""
        return ["hook_inputs", "hook_tangent_raw", "hook_tangent", "hook_state"]

    def record_from_cache(self, cache: dict[str, torch.Tensor], logits: torch.Tensor, b: int) -> dict[str, torch.Tensor]:
        """Sequence ``b``: ``states`` ``(1, T, d, d)`` (after consuming token t), ``inputs`` ``(T, d, d)`` (token
        matrices), ``tangents_raw`` / ``tangents`` ``(1, 1, T, d, d)`` (pull before / after mixing;
        ``tangents`` is what was exponentiated), ``logits`` ``(T, V)``; native matrices (complex for U/SU/T)."""
        nat = self._to_native
        return {"states": nat(cache["hook_state"][b])[None], "inputs": nat(cache["hook_inputs"][b]),
                "tangents_raw": nat(cache["hook_tangent_raw"][b])[None, None],
                "tangents": nat(cache["hook_tangent"][b])[None, None], "logits": logits[b]}
