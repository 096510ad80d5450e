"""What if: interventions on a model's geometry, built on its hook points (:mod:`geomlab.models.hooks`).

Each intervention replaces one value of the forward pass and runs the model on from it, exactly in the
geometry of that value: a state moved along its group (``H_t exp(eps X)``), a 2-plane moved along a geodesic of
the Grassmannian, CEM's energy descent run for other numbers of steps, a state patched in from another text,
an attention head ablated. The results are plain arrays (logits before and after, the changed geometry), for
the app's "What if" panel, the figures and notebooks alike.
"""

from geomlab.whatif.outcome import Outcome
from geomlab.whatif.planes import pair_frame, rotate_plane, swap_plane
from geomlab.whatif.run import PAD_ID, encode_batch, run_with_cache, run_with_hooks

__all__ = ["Outcome", "PAD_ID", "encode_batch", "run_with_cache", "run_with_hooks", "rotate_plane", "swap_plane",
           "pair_frame"]
