"""Requests of KV-reuse workloads for the simulator, each with its blocks: shared prefixes, Mooncake traces, and the
container both they and multi-turn sessions (:mod:`pdplan.sim.reuse_sessions`) fill. Seeded and deterministic.

**Blocks.** A request's KV is a sequence of blocks of ``block_tokens`` tokens, named by integer ids that encode the
prefix before them (vLLM chains each block's hash with its parent's, SGLang walks a radix tree; docs/prefix_cache.md
§2): two requests share a block id only if they share every block before it. Only whole blocks are cached and hit,
and a lookup considers at most the blocks within the first ``P − 1`` prompt tokens, since the engine recomputes the
last prompt token to sample from it (vLLM ``KVCacheManager.get_computed_blocks``: ``max_cache_hit_length =
request.num_tokens - 1``, "the computed blocks must be full"; ``vllm-project/vllm vllm/v1/core/kv_cache_manager.py``
@ 003df29): ``lookup_blocks = ⌊(P − 1)/B⌋``. After the prefill the prompt's ``prompt_blocks`` are cached; at the
end of decode the whole sequence's ``sequence_blocks`` (prompt and output, which a later turn re-sends). A
request's blocks are stored as runs of consecutive ids (``seg_*``, CSR): a system prompt or prefix, then ids of
the request's own.

* **Shared prefixes** (:func:`shared_prefix_requests`): request i picks prefix j by popularity (uniform or Zipf,
  :meth:`~pdplan.specs.reuse.SharedPrefixSpec.prefix_probabilities`); prefix j's length is drawn once; the prompt is
  prefix j then a question, the output follows. Blocks: prefix j's ``⌊L_j/B⌋`` whole blocks (ids shared by all its
  requests), then with ``questions_per_prefix`` G the blocks up to the question's end (shared by the requests that
  resend that question: prefix j's k-th request sends question k mod G, as inference-perf does), then the
  request's own ids. Arrivals: the workload's process (Poisson, constant or gamma gaps) at the rate.
* **Mooncake traces** (:func:`mooncake_requests`): the trace's own ``hash_ids`` (one per ``block_tokens`` prompt
  block, the last partial) and block size; no output blocks (the trace lists none). Arrivals: the trace's
  timestamps scaled to the rate (:mod:`pdplan.sim.trace_replay`), or the workload's process in trace order.
* **Sessions**: :mod:`pdplan.sim.reuse_sessions`.

A prompt longer than the context window is clipped as sampled requests are (:func:`pdplan.workload.bins.clip_to_window`:
output first); its blocks are those of the clipped prompt.

**Candidate hits.** The simulator prices a prefill when it starts (:mod:`pdplan.sim.reuse`), on the hit the cache
gives then; pricing one prompt alone costs milliseconds, so every hit a request can get is priced up front in one
vectorised call. Which hits can occur: a cache touches a request's blocks in order, so among blocks touched together
a later block is never older than an earlier one, and LRU domains evict the older first; a hit therefore ends where
some earlier touch ended inside this request's blocks, or at 0, or at the lookup limit. ``candidate_*`` (CSR) lists
those ends per request (for a session: the system prompt's end and every earlier turn's prompt, sequence and lookup
ends; for a prefix: the prefix's and the question's ends; for a trace: every block). A hit outside them is still
priced, one call at a time (counted in :attr:`pdplan.sim.reuse.ReuseResult.price_misses`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pdplan.errors import SpecError
from pdplan.io.traces_mooncake import MooncakeTrace
from pdplan.specs.arrivals import ConstantArrival, GammaArrival
from pdplan.specs.reuse import SharedPrefixSpec
from pdplan.specs.workload import WorkloadSpec
from pdplan.types import FloatArray, Int64Array
from pdplan.workload.bins import clip_to_window, sample

DEFAULT_BLOCK_TOKENS = 16
"""Tokens per KV block: vLLM's default ``block_size`` (``vllm-project/vllm vllm/config/cache.py``,
``CacheConfig.DEFAULT_BLOCK_SIZE = 16``). SGLang's radix cache pages default to 1 token, LMCache chunks to 256
(docs/prefix_cache.md §3); a Mooncake trace brings its own 512."""


@dataclass(frozen=True, eq=False)
class ReuseRequests:
    """N requests with their blocks (module docstring); request ids are the simulator's."""

    block_tokens: int
    input_tokens: Int64Array
    output_tokens: Int64Array
    arrival_s: FloatArray
    """Known arrival times; NaN for a request released by the one before it (``next_request``)."""
    next_request: Int64Array
    """The request this one's last token releases (a session's next turn), −1 for none."""
    think_s: FloatArray
    """Seconds from this request's last token to ``next_request``'s arrival."""
    count_until_s: float
    """Requests arriving later are the run's drain: simulated, not counted (inf: all counted)."""
    affinity_key: Int64Array
    """What affinity routing hashes: the session, the prefix, or a trace request's first block (a trace's key is
    lengthened to spread the requests when the instances are known, :func:`pdplan.sim.reuse.affinity_keys`)."""
    session: Int64Array
    """Session index, −1 outside sessions."""
    turn: Int64Array
    """Turn index in its session (1 = first), 0 outside sessions."""
    lookup_blocks: Int64Array
    prompt_blocks: Int64Array
    sequence_blocks: Int64Array
    seg_offsets: Int64Array
    seg_start: Int64Array
    seg_len: Int64Array
    candidate_offsets: Int64Array
    candidate_blocks: Int64Array
    warm_request: Int64Array
    """Touches before t = 0, oldest first (sessions in progress at 0): whose block stream (a request of it)…"""
    warm_blocks: Int64Array
    """… and how many of its blocks (that session's history before t = 0)."""
    truncated_sessions: int = 0
    """Sessions cut at the first turn whose prompt and output exceed the context window."""
    kind: str = "sessions"
    """``sessions``, ``shared-prefix`` or ``trace``: a trace's affinity key depends on the instances
    (:func:`pdplan.sim.reuse.affinity_keys`)."""
    new_tokens: Int64Array | None = None
    """A session turn's new tokens U_k (its prompt less its history; None outside sessions): PPD's append
    (:mod:`pdplan.sim.turn_placement`)."""

    @property
    def count(self) -> int:
        return int(self.input_tokens.size)

    def block_lists(self) -> tuple[list[int], list[int], list[int]]:
        """The block runs as Python lists (offsets, starts, lengths), for :func:`blocks_of`."""
        return self.seg_offsets.tolist(), self.seg_start.tolist(), self.seg_len.tolist()


def blocks_of(runs: tuple[list[int], list[int], list[int]], request: int, count: int) -> list[int]:
    """The first ``count`` block ids of ``request`` from :meth:`ReuseRequests.block_lists`."""
    offsets, starts, lengths = runs
    out: list[int] = []
    for s in range(offsets[request], offsets[request + 1]):
        take = min(lengths[s], count - len(out))
        out.extend(range(starts[s], starts[s] + take))
        if len(out) >= count:
            break
    return out


def csr(lists: list[Int64Array]) -> tuple[Int64Array, Int64Array]:
    """(offsets, values) of a list of int arrays."""
    lengths = np.array([a.size for a in lists], dtype=np.int64)
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    values = np.concatenate(lists).astype(np.int64) if lists else np.zeros(0, dtype=np.int64)
    return offsets, values


def unit_gaps(arrival: object, size: int, rng: np.random.Generator) -> FloatArray:
    """``size`` inter-arrival gaps of mean 1 of the workload's process: Poisson (exponential), constant, or gamma of
    coefficient of variation cv (shape 1/cv², scale cv²; docs/reuse_workloads.md §4)."""
    if isinstance(arrival, ConstantArrival):
        return np.ones(size)
    if isinstance(arrival, GammaArrival):
        cv2 = float(arrival.cv) ** 2
        return np.asarray(rng.gamma(1.0 / cv2, cv2, size), dtype=np.float64)
    if arrival in ("poisson", "trace"):
        return np.asarray(rng.exponential(1.0, size), dtype=np.float64)
    raise SpecError(f"unknown arrival process {arrival!r}", field="arrival")


def check_block_tokens(block_tokens: int) -> None:
    if isinstance(block_tokens, bool) or not isinstance(block_tokens, int) or block_tokens < 1:
        raise SpecError(f"must be an integer >= 1, got {block_tokens!r}", field="block_tokens")


def _runs(segments: list[tuple[Int64Array, Int64Array]]) -> tuple[Int64Array, Int64Array, Int64Array]:
    """CSR of block runs from per-run (start, length) columns, one column pair per run slot, empty runs dropped."""
    starts = np.stack([s for s, _ in segments], axis=1)
    lengths = np.stack([n for _, n in segments], axis=1)
    keep = lengths > 0
    offsets = np.concatenate(([0], np.cumsum(keep.sum(axis=1)))).astype(np.int64)
    return offsets, starts[keep].astype(np.int64), lengths[keep].astype(np.int64)


def _limits(prompt: Int64Array, output: Int64Array, block_tokens: int) -> tuple[Int64Array, Int64Array, Int64Array]:
    """(lookup, prompt, sequence) whole blocks: ⌊(P − 1)/B⌋, ⌊P/B⌋, ⌊(P + O)/B⌋."""
    return (prompt - 1) // block_tokens, prompt // block_tokens, (prompt + output) // block_tokens


def shared_prefix_requests(
    spec: SharedPrefixSpec,
    arrival_process: object,
    rate_rps: float,
    n_requests: int,
    *,
    block_tokens: int = DEFAULT_BLOCK_TOKENS,
    seed: int = 0,
    context_window: int | None = None,
) -> ReuseRequests:
    """``n_requests`` shared-prefix requests at ``rate_rps`` (module docstring). Lengths are drawn with the
    workload's own sampler (:func:`pdplan.workload.bins.sample`): a prefix's once, a repeated question's once."""
    check_block_tokens(block_tokens)
    rng = np.random.default_rng([seed, 20])
    arrival = np.cumsum(unit_gaps(arrival_process, n_requests, np.random.default_rng([seed, 21]))) / rate_rps
    prefix = _pick_prefixes(spec, n_requests, rng)
    used, of_prefix = np.unique(prefix, return_inverse=True)
    prefix_len = _draw(spec.prefix_tokens, used.size, rng)
    keys, of_key = np.unique(_question_keys(spec, prefix), return_inverse=True)
    question_len = _draw(spec.question_tokens, keys.size, rng)
    prompt, output = _clip(prefix_len[of_prefix] + question_len[of_key], _draw(spec.output_tokens, n_requests, rng),
                           context_window)  # fmt: skip
    lookup, prompt_n, seq = _limits(prompt, output, block_tokens)
    prefix_blocks = prefix_len // block_tokens
    question_blocks = (prefix_len[of_prefix] + question_len[of_key]) // block_tokens - prefix_blocks[of_prefix]
    if spec.questions_per_prefix is None:  # every question new: its blocks are the request's own
        question_blocks = np.zeros_like(question_blocks)
    key_blocks = np.zeros(keys.size, dtype=np.int64)
    key_blocks[of_key] = question_blocks
    n_prefix = np.minimum(prefix_blocks[of_prefix], seq)
    n_question = np.minimum(question_blocks, seq - n_prefix)
    own = seq - n_prefix - n_question
    prefix_base = _bases(prefix_blocks, 0)
    key_base = _bases(key_blocks, int(prefix_blocks.sum()))
    own_base = _bases(own, int(prefix_blocks.sum() + key_blocks.sum()))
    runs = _runs([(prefix_base[of_prefix], n_prefix), (key_base[of_key], n_question), (own_base, own)])
    ends = np.stack([np.zeros_like(lookup), n_prefix, n_prefix + n_question, lookup], axis=1)
    cand = np.minimum(ends, lookup[:, None]).ravel()
    return ReuseRequests(
        block_tokens=block_tokens, input_tokens=prompt, output_tokens=output, arrival_s=arrival,
        next_request=np.full(n_requests, -1, np.int64), think_s=np.zeros(n_requests), count_until_s=math.inf,
        affinity_key=prefix.astype(np.int64), session=np.full(n_requests, -1, np.int64),
        turn=np.zeros(n_requests, np.int64), lookup_blocks=lookup, prompt_blocks=prompt_n, sequence_blocks=seq,
        seg_offsets=runs[0], seg_start=runs[1], seg_len=runs[2],
        candidate_offsets=np.arange(0, cand.size + 1, 4, dtype=np.int64), candidate_blocks=cand.astype(np.int64),
        warm_request=np.zeros(0, np.int64), warm_blocks=np.zeros(0, np.int64), kind="shared-prefix",
    )  # fmt: skip


def _pick_prefixes(spec: SharedPrefixSpec, n: int, rng: np.random.Generator) -> Int64Array:
    """Prefix index per request, drawn by popularity."""
    if spec.popularity.kind == "uniform" or spec.num_prefixes == 1:
        return np.asarray(rng.integers(0, spec.num_prefixes, n), dtype=np.int64)
    return np.asarray(rng.choice(spec.num_prefixes, n, p=spec.prefix_probabilities()), dtype=np.int64)


def _question_keys(spec: SharedPrefixSpec, prefix: Int64Array) -> Int64Array:
    """A key per distinct prompt: (prefix, question k mod G) for prefix j's k-th request, or the request itself."""
    n = prefix.size
    if spec.questions_per_prefix is None:
        return np.arange(n, dtype=np.int64)
    order = np.argsort(prefix, kind="stable")
    sorted_prefix = prefix[order]
    first = np.searchsorted(sorted_prefix, sorted_prefix, side="left")
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - first
    return prefix * spec.questions_per_prefix + rank % spec.questions_per_prefix


def _draw(law: object, n: int, rng: np.random.Generator) -> Int64Array:
    """``n`` token counts of a length law, by the workload sampler (:func:`pdplan.workload.bins.sample`)."""
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    return sample(WorkloadSpec.model_validate({"input_tokens": law, "output_tokens": law}), n, rng)[0]


def _clip(prompt: Int64Array, output: Int64Array, window: int | None) -> tuple[Int64Array, Int64Array]:
    output = np.maximum(output, 1)
    if window is None:
        return prompt.astype(np.int64), output.astype(np.int64)
    p, o = clip_to_window(prompt.astype(float), output.astype(float), window)
    return p.astype(np.int64), o.astype(np.int64)


def _bases(sizes: Int64Array, first: int) -> Int64Array:
    """First id of each group of ``sizes`` consecutive ids, starting at ``first``."""
    return (first + np.concatenate(([0], np.cumsum(sizes)[:-1]))).astype(np.int64) if sizes.size else sizes


def mooncake_requests(
    trace: MooncakeTrace, block_tokens: int, arrival_s: FloatArray, context_window: int | None = None
) -> ReuseRequests:
    """The trace's requests in file order with their own block ids and block size, arriving at ``arrival_s``
    (module docstring). Every whole block up to the lookup limit is a candidate hit."""
    check_block_tokens(block_tokens)
    n = trace.requests
    prompt, output = _clip(trace.input_tokens, trace.output_tokens, context_window)
    lookup = (prompt - 1) // block_tokens
    blocks = -(-prompt // block_tokens)  # ceil: the trace's ids include the partial last block
    counts = trace.block_counts()
    owner = np.repeat(np.arange(n), counts)
    within = np.arange(trace.hash_ids.size) - np.repeat(trace.hash_offsets[:-1], counts)
    keep = within < blocks[owner]  # a clipped prompt keeps its first blocks
    runs = _id_runs(trace.hash_ids[keep], owner[keep], n)
    cand_counts = lookup + 1
    cand_offsets = np.concatenate(([0], np.cumsum(cand_counts))).astype(np.int64)
    cand = np.arange(int(cand_offsets[-1]), dtype=np.int64) - np.repeat(cand_offsets[:-1], cand_counts)
    return ReuseRequests(
        block_tokens=block_tokens, input_tokens=prompt, output_tokens=output,
        arrival_s=np.asarray(arrival_s, dtype=np.float64), next_request=np.full(n, -1, np.int64),
        think_s=np.zeros(n), count_until_s=math.inf, affinity_key=trace.hash_ids[trace.hash_offsets[:-1]].copy(),
        session=np.full(n, -1, np.int64), turn=np.zeros(n, np.int64), lookup_blocks=lookup, prompt_blocks=blocks,
        sequence_blocks=blocks, seg_offsets=runs[0], seg_start=runs[1], seg_len=runs[2],
        candidate_offsets=cand_offsets, candidate_blocks=cand, warm_request=np.zeros(0, np.int64),
        warm_blocks=np.zeros(0, np.int64), kind="trace",
    )  # fmt: skip


def _id_runs(flat: Int64Array, owner: Int64Array, n: int) -> tuple[Int64Array, Int64Array, Int64Array]:
    """Requests' explicit ids (``flat``, request ``owner`` of each, in order) as runs of consecutive ids (CSR)."""
    if flat.size == 0:
        return np.zeros(n + 1, dtype=np.int64), flat, flat
    new_run = np.ones(flat.size, dtype=bool)
    new_run[1:] = (flat[1:] != flat[:-1] + 1) | (owner[1:] != owner[:-1])
    heads = np.flatnonzero(new_run)
    lengths = np.diff(np.append(heads, flat.size)).astype(np.int64)
    offsets = np.concatenate(([0], np.cumsum(np.bincount(owner[heads], minlength=n)))).astype(np.int64)
    return offsets, flat[heads].astype(np.int64), lengths
