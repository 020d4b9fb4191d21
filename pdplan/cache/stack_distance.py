"""Exact LRU stack distances over block hashes, and the prefix-cache hit-ratio curve of a request stream.

**Model** (``docs/prefix_cache.md §2``). A request is a chain of KV blocks (its prompt cut into blocks of
``block_tokens`` tokens, each named by a hash of its content and of every block before it, as vLLM's prefix caching
and SGLang's radix tree match them). Engines reuse the *longest cached prefix*: block i of a request hits iff its
blocks 0..i are all cached. The cache is one LRU over blocks. Convention: a request is looked up against the cache
as it was at the request's arrival, then all its blocks are touched in prompt order (moved to the most-recent end,
missing ones inserted, the least recent evicted beyond the capacity); so a request's own blocks never hit each
other.

**Mattson's stack algorithm** (Mattson, Gecsei, Slutz & Traiger, IBM Systems Journal 9(2), 1970): with all accesses
in one sequence (requests in arrival order, each request's blocks in prompt order), the reuse distance d(t) of
access t is the number of distinct blocks accessed since the previous access of the same block (∞ for a first
access), and an LRU of capacity C holds the block accessed at t iff d(t) < C, for every C at once (the inclusion
property). For prefix matching, block i of a request hits iff ``max(d(t_0), …, d(t_i)) < C``. This running
maximum of the in-order distances equals the lookup at arrival: touching the request's earlier blocks can push
block i down the stack only by blocks that were themselves older than block i's last access, and the oldest of
them is older still, so the running maximum is unchanged (proof in ``docs/prefix_cache.md §2``;
``tests/unit/test_stack_distance.py`` checks it against an ``OrderedDict`` LRU at every capacity).

**Computation.** With ``prev[t]`` the previous access of the block accessed at t (−1 if none), the task's identity
``d(t) = #{j < t : prev[j] ≤ prev[t]} − (prev[t] + 1)`` is a 2-D dominance count. Two facts shrink it:

1. *Runs.* If ``prev[t] = prev[t−1] + 1`` (the two blocks were last accessed together, in the same order), then
   ``d(t) = d(t−1)``: the window loses the block at ``prev[t]`` (which is the block of t) and gains the block at
   ``t − 1`` (whose previous access is before the window). So only the first access of each maximal such run (a
   *head*) needs counting; a run of reused prefix blocks is one head.
2. *Run weights.* A run that lies before t has its previous accesses either all before ``prev[t]`` or all after it
   (``prev[t]``'s next access is t, so it is not inside another run's range). Hence
   ``d(t) = t − (reused accesses before t) + Σ_{heads h < t, prev[h] < prev[t]} L_h − prev[t] − 1`` with L_h the
   run lengths: a weighted dominance sum over the heads only
   (:func:`pdplan.cache.dominance.earlier_smaller_weight`).

The curve (:class:`pdplan.cache.curve.HitRatioCurve`) is then built from the heads alone: within a request the
distance is constant along a run, and the first cold (first-ever) access ends the request's hittable prefix.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from pdplan.cache.curve import HitRatioCurve, curve_from_runs
from pdplan.cache.dominance import earlier_smaller_weight
from pdplan.cache.trace import BlockTrace
from pdplan.numerics.digest import array_digest
from pdplan.types import Int64Array

COLD = np.iinfo(np.int64).max
"""Reuse distance of a first access (compulsory miss): larger than any capacity."""


def previous_access(block_ids: Int64Array) -> Int64Array:
    """``prev[t]``: the position of the previous access of ``block_ids[t]``, −1 for a first access.

    One sort of ``id << bits | position`` groups equal ids in position order (ids outside ``[0, 2^(63−bits))`` are
    relabelled first by ``np.unique``, which is exact but slower).
    """
    n = len(block_ids)
    if n == 0:
        return np.zeros(0, np.int64)
    back = _steps_back(np.asarray(block_ids, dtype=np.int64))
    prev = back + np.arange(n, dtype=np.int64)
    prev[back == _NEVER] = -1
    return prev


_NEVER = np.iinfo(np.int64).min
"""Steps back to the previous access of a first access."""


def _steps_back(ids: Int64Array) -> Int64Array:
    """``prev[t] − t`` (negative) for every access, :data:`_NEVER` for a first access."""
    n = len(ids)
    bits = max(1, int(n - 1).bit_length())
    if ids.min() < 0 or int(ids.max()) >= 1 << (63 - bits):
        ids = np.unique(ids, return_inverse=True)[1].astype(np.int64).ravel()
    key = np.left_shift(ids, bits)
    key |= np.arange(n, dtype=np.int64)
    key.sort()
    gap = np.empty(n, np.int64)
    np.bitwise_xor(key[1:], key[:-1], out=gap[1:])
    first = gap[1:] >= 1 << bits  # the ids differ: position[i + 1] is the first access of its block
    key &= (1 << bits) - 1  # positions, grouped by id
    np.subtract(key[:-1], key[1:], out=gap[1:])
    back = np.empty(n, np.int64)
    back[key[1:]] = gap[1:]
    back[key[0]] = _NEVER
    back[key[1:][first]] = _NEVER
    return back


@dataclass(frozen=True)
class _Runs:
    """Maximal runs of accesses that share one reuse distance, in position order: a head (a reuse) and the
    accesses that continue it, or consecutive cold (first) accesses. Runs never cross a request boundary."""

    starts: Int64Array
    lengths: Int64Array
    reused: npt.NDArray[np.bool_]
    distances: Int64Array
    """Reuse distance of every run (COLD for a cold run)."""
    previous: Int64Array
    """Previous access of every run's first access (−1 for a cold run); the run's t-th access follows ``previous +
    t``."""


def _runs(block_ids: Int64Array, offsets: Int64Array) -> _Runs:
    n = len(block_ids)
    if n == 0:
        empty = np.zeros(0, np.int64)
        return _Runs(empty, empty, np.zeros(0, bool), empty, empty)
    back = _steps_back(np.asarray(block_ids, dtype=np.int64))
    # t continues the run of t − 1 iff prev[t] = prev[t − 1] + 1, i.e. the same steps back; cold accesses all
    # carry _NEVER, so consecutive cold accesses form one run
    boundary = np.empty(n, bool)
    boundary[0] = True
    np.not_equal(back[1:], back[:-1], out=boundary[1:])
    boundary[offsets[:-1][offsets[:-1] < n]] = True
    starts = np.flatnonzero(boundary).astype(np.int64)
    lengths = np.diff(starts, append=n).astype(np.int64)
    steps = back[starts]
    reused = steps != _NEVER
    distances = np.full(len(starts), COLD, np.int64)
    heads, head_lengths = starts[reused], lengths[reused]
    head_prev = heads + steps[reused]
    reused_before = np.cumsum(head_lengths) - head_lengths
    dominated = earlier_smaller_weight(head_prev, head_lengths)
    distances[reused] = heads - reused_before + dominated - head_prev - 1
    previous = np.full(len(starts), -1, np.int64)
    previous[reused] = head_prev
    return _Runs(starts, lengths, reused, distances, previous)


def reuse_distances(block_ids: Int64Array) -> Int64Array:
    """Mattson's LRU reuse distance of every access of one sequence (:data:`COLD` for a first access): the number
    of distinct blocks accessed since the previous access of the same block."""
    ids = np.asarray(block_ids, dtype=np.int64)
    runs = _runs(ids, np.array([0, len(ids)], np.int64))
    return np.repeat(runs.distances, runs.lengths)


def prefix_distances(trace: BlockTrace) -> Int64Array:
    """Per access, the running maximum of the reuse distances over its request's blocks so far: block i of a
    request hits a cache of C blocks iff this is < C (:data:`COLD` if it can never hit)."""
    offsets = np.asarray(trace.offsets, np.int64)
    runs = _runs(np.asarray(trace.block_ids, np.int64), offsets)
    n = int(offsets[-1])
    capped = np.minimum(np.repeat(runs.distances, runs.lengths), n)  # finite distances are < n
    request = np.repeat(np.arange(trace.n_requests, dtype=np.int64), trace.blocks_per_request)
    running = np.maximum.accumulate(request * (n + 1) + capped) - request * (n + 1)
    return np.where(running >= n, COLD, running)


def arrival_distances(trace: BlockTrace) -> Int64Array:
    """Per access, its block's reuse distance at its request's arrival (:data:`COLD` for a first access): the
    position of the block in the LRU stack the request is looked up against, which says which tier of a hierarchy
    holds it (``docs/prefix_cache.md §3``), where :func:`prefix_distances` says whether it hits at all.

    Derivation: d(t_i) counts the distinct blocks accessed in ``(prev[i], t_i)``, the arrival distance a_i those in
    ``(prev[i], start)``, start the request's first access. The accesses in ``[start, t_i)`` are the request's
    earlier blocks j; such a block is counted in d(t_i) but not in a_i iff its previous access is before the window,
    ``prev[j] < prev[i]`` (a first access included; a block repeated within the request has ``prev[j] ≥ start``
    and was counted with its first occurrence). So ``a_i = d(t_i) − #{start ≤ j < t_i : prev[j] < prev[i]}``. Over
    runs (module docstring): the k-th access of a run has the run's distance, and its k earlier run-mates all have a
    smaller ``prev``; an earlier run of the request has its previous accesses all below the run's or all above (fact
    2), so it counts whole or not at all: a dominance sum over the request's runs weighted by their lengths, ranked by
    (request, prev, position) so that every run of the earlier requests counts too and is taken off. A block already
    touched by its own request (prev[i] ≥ start) is at the top of the stack: 0."""
    ids = np.asarray(trace.block_ids, np.int64)
    if ids.size == 0:
        return np.zeros(0, np.int64)
    offsets = np.asarray(trace.offsets, np.int64)
    runs = _runs(ids, offsets)
    request = np.searchsorted(offsets, runs.starts, side="right") - 1
    rank = np.empty(len(runs.starts), np.int64)
    rank[np.lexsort((runs.starts, runs.previous, request))] = np.arange(len(runs.starts), dtype=np.int64)
    older = earlier_smaller_weight(rank, runs.lengths) - offsets[request]
    step = np.arange(ids.size, dtype=np.int64) - np.repeat(runs.starts, runs.lengths)
    arrival = np.repeat(np.where(runs.reused, runs.distances - older, 0), runs.lengths) - step
    own = np.repeat(runs.previous, runs.lengths) + step >= np.repeat(offsets[request], runs.lengths)
    arrival = np.where(own, 0, np.maximum(arrival, 0))
    return np.where(np.repeat(runs.reused, runs.lengths), arrival, COLD)


DISTANCE_MEMO_ENTRIES = 32
"""Traces whose distances :func:`memo_prefix_distances` and :func:`memo_arrival_distances` keep (each): the
optimiser's cache model asks for one per instance of each deployment size and routing it prices, again for every
rate and tier size (mooncake-trace's optimize: 122 asks, 12 distinct traces); each holds the trace and one int64
per access."""


@dataclass(frozen=True)
class _Accesses:
    """A trace's access sequence as a memo key: compared and hashed by a BLAKE2b digest of its offsets and block ids
    (all the distances read), so an equal trace finds the answer and a changed one cannot; the trace rides along."""

    digest: bytes
    trace: BlockTrace = field(compare=False)

    @classmethod
    def of(cls, trace: BlockTrace) -> _Accesses:
        offsets, block_ids = (np.asarray(v, dtype=np.int64) for v in (trace.offsets, trace.block_ids))
        return cls(array_digest(offsets, block_ids, digest_size=32), trace)


def memo_prefix_distances(trace: BlockTrace) -> Int64Array:
    """:func:`prefix_distances`, memoised by the trace's values (:class:`_Accesses`); the array is read-only."""
    return _memo(_Accesses.of(trace), arrival=False)


def memo_arrival_distances(trace: BlockTrace) -> Int64Array:
    """:func:`arrival_distances`, memoised by the trace's values (:class:`_Accesses`); the array is read-only."""
    return _memo(_Accesses.of(trace), arrival=True)


@functools.lru_cache(maxsize=2 * DISTANCE_MEMO_ENTRIES)
def _memo(key: _Accesses, arrival: bool) -> Int64Array:
    out = arrival_distances(key.trace) if arrival else prefix_distances(key.trace)
    out.flags.writeable = False
    return out


def hit_ratio_curve(trace: BlockTrace) -> HitRatioCurve:
    """The exact prefix-cache hit-ratio curve of an LRU cache at every capacity (blocks)."""
    offsets = np.asarray(trace.offsets, np.int64)
    runs = _runs(np.asarray(trace.block_ids, np.int64), offsets)
    nonempty = np.flatnonzero(trace.blocks_per_request > 0)
    first_run = np.searchsorted(runs.starts, offsets[nonempty])
    local = _local_request(len(runs.starts), first_run)
    cold: Int64Array = (~runs.reused).astype(np.int64)
    cold_before = np.cumsum(cold) - cold
    hittable = runs.reused & (cold_before == cold_before[first_run][local])
    keep = np.flatnonzero(hittable)
    req, dist, start = nonempty[local[keep]], runs.distances[keep], runs.starts[keep]
    ceiling = int(dist.max()) + 1 if len(dist) else 1
    running = np.maximum.accumulate(req * ceiling + dist) - req * ceiling
    prompt_end = offsets[req] + trace.prompt_block_counts[req]
    in_prompt = np.clip(np.minimum(start + runs.lengths[keep], prompt_end) - start, 0, None)
    tokens = in_prompt * float(trace.block_tokens)
    tokens -= np.where(start + in_prompt == prompt_end, trace.last_block_shortfall()[req], 0.0)
    tokens[in_prompt == 0] = 0.0
    prompts = trace.prompt_lengths()
    share = tokens / np.maximum(prompts[req], 1.0)
    first = ((start == offsets[req]) & (in_prompt > 0)).astype(np.float64)
    return curve_from_runs(
        running + 1,
        tokens,
        first,
        share,
        block_tokens=trace.block_tokens,
        total_tokens=float(prompts.sum()),
        n_requests=trace.n_requests,
    )


def _local_request(n_runs: int, first_run: Int64Array) -> Int64Array:
    """For every run, the index among the non-empty requests of the request it belongs to."""
    flag = np.zeros(n_runs, np.int64)
    flag[first_run] = 1
    return np.cumsum(flag) - 1
