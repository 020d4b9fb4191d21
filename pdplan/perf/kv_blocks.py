"""What the KV block (page) size costs besides the transfer's descriptors (issue #24; docs/kv_data_plane.md §7).

Paged engines hold a sequence's KV in blocks of ``b`` tokens (vLLM ``--block-size``, SGLang ``--page-size``,
TensorRT-LLM ``tokens_per_block``). A larger block cuts the transfer's descriptors (:mod:`pdplan.transfer.data_plane`)
but costs in two places, priced here:

**Partly filled blocks.** A sequence of ``n`` tokens takes ``⌈n/b⌉`` blocks, so ``w(n) = ⌈n/b⌉·b − n = (−n) mod b``
token slots of its last block are allocated and empty (0 ≤ w ≤ b − 1). A decode sequence of prompt ``l`` and ``o``
output tokens holds ``l + j`` tokens during its step ``j = 0 … o−1`` (the footprint of
:func:`pdplan.queueing.kv_admission.kv_held`), so the slots it wastes, averaged over its residence, are

    W(l, o) = (1/o) · Σ_{j=0}^{o−1} w(l + j).

The residues ``w(l + j)`` run ``s, s−1, …, 0, b−1, b−2, …`` from ``s = w(l)``: every ``b`` consecutive steps take each
value 0 … b−1 once. With ``o = q·b + r`` (0 ≤ r < b) the ``q`` full cycles sum to ``q·b(b−1)/2`` and the ``r`` steps
left, ``s, s−1, …`` wrapping to ``b − 1`` after 0, sum to

    r·s − r(r−1)/2                              if r ≤ s + 1,
    s(s+1)/2 + k(b−1) − k(k−1)/2,  k = r − s − 1  otherwise.

So ``W = (b−1)/2`` exactly when ``o`` is a multiple of ``b`` (whatever ``l``), and tends to it as ``o/b`` grows: the
mean ``(b − 1)/2`` of lengths not aligned to ``b``. For a fixed-length workload the formula is exact. A sequence costs
the KV capacity ``W`` token slots besides its own tokens, as a fixed per-sequence state does
(:mod:`pdplan.perf.memory`); over a workload the mean per resident sequence weights each (l, o) cell by its share of
the residence, ``p(l, o)·o`` (a sequence resides for its ``o`` steps).

**Prefix-cache hits are whole blocks.** An engine finds a cached prefix block by block (vLLM hashes full blocks; the
last prompt token is always recomputed to produce the first output's logits), so ``L`` cached tokens of a prompt of
``P`` yield ``b·⌊min(L, P − 1)/b⌋`` hit tokens: a shared prefix or session history of ``L`` tokens is ``⌊L/b⌋·b``
when the prompt goes beyond it. The simulator's block caches (:mod:`pdplan.sim.reuse_requests`: ``(prompt − 1) // b``
lookup blocks) count the same.

**Attention-kernel efficiency** by block size is not priced: no measured block-size effect was found in the
calibration data (``aiconfigurator`` attention tables and Vidur profiles carry no block-size column) nor in the engine
references, and none is invented.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from pdplan.errors import SpecError
from pdplan.types import FloatArray


def _check_block(block_tokens: int) -> None:
    if isinstance(block_tokens, bool) or not isinstance(block_tokens, int) or block_tokens < 1:
        raise SpecError(f"must be an integer >= 1, got {block_tokens!r}", field="kv_block_tokens")


def partial_block_tokens(tokens: npt.ArrayLike, block_tokens: int) -> FloatArray:
    """Empty slots of a sequence's last block, ``w(n) = ⌈n/b⌉·b − n`` (module docstring): 100 tokens at b = 16 take
    7 blocks (112 slots), 12 empty; 96 tokens, 0."""
    _check_block(block_tokens)
    n = np.asarray(tokens, dtype=np.float64)
    return np.asarray(np.ceil(n / block_tokens) * block_tokens - n, dtype=np.float64)


def mean_partial_block_tokens(
    input_tokens: npt.ArrayLike, output_tokens: npt.ArrayLike, block_tokens: int
) -> FloatArray:
    """``W(l, o)``: a decode sequence's empty slots averaged over its ``o`` steps, holding ``l + j`` tokens at step j
    (closed form in the module docstring). l = 100, o = 5, b = 16: w = 12, 11, 10, 9, 8 → 10; o = 32 → 7.5."""
    _check_block(block_tokens)
    b = float(block_tokens)
    o = np.asarray(output_tokens, dtype=np.float64)
    s = partial_block_tokens(input_tokens, block_tokens)
    q, r = np.floor(o / b), np.mod(o, b)
    k = np.maximum(r - s - 1.0, 0.0)
    rest = np.where(
        r <= s + 1.0, r * s - r * (r - 1.0) / 2.0, s * (s + 1.0) / 2.0 + k * (b - 1.0) - k * (k - 1.0) / 2.0
    )
    total = q * b * (b - 1.0) / 2.0 + rest
    return np.asarray(np.where(o > 0.0, total / np.maximum(o, 1.0), s), dtype=np.float64)


def resident_partial_block_tokens(
    input_tokens: npt.ArrayLike, output_tokens: npt.ArrayLike, prob: npt.ArrayLike, block_tokens: int
) -> float:
    """Mean empty slots per resident decode sequence over a workload's (l, o) cells of probability ``p``: each cell's
    ``W(l, o)`` weighted by its residence ``p·o`` (module docstring). One cell (l, o) gives ``W(l, o)`` itself."""
    o = np.asarray(output_tokens, dtype=np.float64)
    weight = np.asarray(prob, dtype=np.float64) * o
    total = float(weight.sum())
    if total <= 0.0:
        raise SpecError("a workload with no decode steps has no resident sequence", field="output_tokens")
    return float(weight.ravel() @ mean_partial_block_tokens(input_tokens, o, block_tokens).ravel() / total)


def whole_block_hit_tokens(cached_tokens: npt.ArrayLike, prompt_tokens: npt.ArrayLike, block_tokens: int) -> FloatArray:
    """Hit tokens of a prompt of ``P`` tokens whose first ``L`` are cached: ``b·⌊min(L, P − 1)/b⌋`` (module
    docstring). A 1,000-token session history under a 1,200-token prompt: 992 at b = 16, 960 at b = 64."""
    _check_block(block_tokens)
    usable = np.minimum(np.asarray(cached_tokens, dtype=np.float64), np.asarray(prompt_tokens, dtype=np.float64) - 1.0)
    return np.asarray(np.floor(np.maximum(usable, 0.0) / block_tokens) * block_tokens, dtype=np.float64)
