"""A colocated instance's TTFT with the overlap scheduler's extra iteration, whose length follows the request's own
TTFT (:mod:`pdplan.serving.colocated`, :mod:`pdplan.serving.ttft` ``overlap_s``).

Token 1 leaves k iterations after the one that sampled it (the end of its prompt). On a colocated instance that
iteration is either a plain decode step (k·s_p) or one that carries prompt work (k·s_b, a chunk step or another
prompt's pass), the latter where the departing prompt leaves its queue holding work, probability ρ on average. Which
requests: a prompt whose sojourn T in the queue was long leaves work behind more often (the prompts that arrived
during it, 1 − e^{−λT} for an M/G/1), and a long sojourn is a long TTFT. Taking the step independent of the TTFT puts
the long steps on the short TTFTs as often as on the long ones: SGLang's colocated chat (default hardware, half its
limit) then gains 45 ms at P90 where the simulator gains 75 (TensorRT-LLM's OPT-13B on one A100 pair at 7.8 req/s;
both 40-46 ms at the mean). So the step is coupled to the TTFT *comonotonically* within each prompt bin: the longest
share ρ of the bin's TTFTs get k·s_b, the rest k·s_p (the strongest positive coupling, where the M/G/1's is
``1 − e^{−λT}``), i.e. with F_0 the bin's TTFT law without the step

    F(a) = min(1 − ρ, F_0(a − k s_p)) + max(0, F_0(a − k s_b) − (1 − ρ)),

whose mean is ``E[T_0] + k((1 − ρ)s_p + ρ s_b)`` (the coupling moves no mass between the two steps) and whose
quantiles lie between the law's shifted by k·s_p and by k·s_b.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import partial

import numpy as np

from pdplan.queueing.distributions import ShiftedMixture, mixture_quantile
from pdplan.queueing.ttft_mixture import TtftMixture
from pdplan.types import FloatArray

BRACKET_RTOL = 1e-8
"""The busy law's quantile, found to brentq's tolerance (1e-10 relative), is widened by this share as the bracket's
top."""


def shifted(ttft: TtftMixture | ShiftedMixture, shift_s: FloatArray) -> TtftMixture | ShiftedMixture:
    """``ttft`` with every offset ``shift_s[r]`` later at rate r (a constant shift of the law per rate)."""
    if isinstance(ttft, TtftMixture):
        return dataclasses.replace(ttft, offsets_s=ttft.offsets_s + shift_s[:, None, None])
    offsets = np.broadcast_to(ttft.offsets_s, (shift_s.size, ttft.prob.size))
    return ShiftedMixture(ttft.wait, offsets + shift_s[:, None], ttft.prob)


@dataclass(frozen=True, slots=True)
class OverlapTtft:
    """TTFT plus the overlap scheduler's extra iteration, coupled to the TTFT (module docstring)."""

    plain: TtftMixture | ShiftedMixture
    """The TTFT law shifted by k·s_p (a plain step) at each rate."""
    busy: TtftMixture | ShiftedMixture
    """The same law shifted by k·s_b (a step carrying prompt work)."""
    busy_prob: FloatArray
    """ρ per rate: the share of tokens that wait behind a step carrying prompt work."""

    @property
    def mean_s(self) -> FloatArray:
        rho = self.busy_prob
        return np.asarray((1.0 - rho) * self.plain.mean_s + rho * self.busy.mean_s, dtype=np.float64)

    def cdf_per_bin(self, a_s: float) -> FloatArray:
        """``P(TTFT ≤ a | bin)``, shape ``[R, L]`` (module docstring)."""
        idle = (1.0 - self.busy_prob)[:, None]
        early = np.minimum(idle, self.plain.cdf_per_bin(a_s))
        late = np.maximum(0.0, self.busy.cdf_per_bin(a_s) - idle)
        return np.asarray(early + late, dtype=np.float64)

    def quantile(self, q: float) -> FloatArray:
        """The mixture's quantile per rate by brentq, between the plain and the busy law's (each found to brentq's
        tolerance: the bracket is widened by :data:`BRACKET_RTOL` of the busy one, so the cdf there reaches q)."""
        lo, hi = self.plain.quantile(q), self.busy.quantile(q)
        out = np.empty(lo.size)
        prob = self.plain.prob
        for r in range(lo.size):
            low, high = float(min(lo[r], hi[r])), float(max(lo[r], hi[r]))
            high += BRACKET_RTOL * high
            out[r] = mixture_quantile(partial(self._row_cdf, r, prob), q, low, high, "TTFT")
        return out

    def _row_cdf(self, r: int, prob: FloatArray, a_s: float) -> float:
        """The mixture cdf of rate r at ``a_s``."""
        return float(self.cdf_per_bin(a_s)[r] @ prob)
