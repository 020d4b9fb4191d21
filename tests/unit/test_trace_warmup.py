"""A trace's hit ratios count its requests after the cache's warm-up, as the simulator does
(:data:`pdplan.cache.trace.WARMUP_SHARE`, docs/prefix_cache.md §7), and both sides split a trace over instances with
one hash (:func:`pdplan.sim.reuse.trace_routes`, docs/prefix_cache.md §9)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pdplan.cache.trace import WARMUP_SHARE, BlockTrace, counted_from
from pdplan.io.traces_mooncake import load_mooncake_trace
from pdplan.serving.cache_report import CacheReport
from pdplan.serving.prefix_cache import CacheSetup, Domain, Reuse, affinity_owner, cache_classes
from pdplan.sim.metrics import warmup_count
from pdplan.sim.reuse import affinity_keys, trace_routes
from pdplan.sim.reuse_requests import mooncake_requests
from pdplan.specs.cache import CacheSpec

TRACE = Path(__file__).resolve().parents[1] / "data" / "mooncake" / "conversation_trace_head200.jsonl"


def test_the_warm_up_is_the_simulators() -> None:
    assert [counted_from(n) for n in (1, 9, 10, 19, 20, 3993)] == [0, 0, 1, 1, 2, 399]
    assert all(counted_from(n) == warmup_count(n, WARMUP_SHARE) for n in (1, 9, 10, 19, 20, 3993))


def test_a_trace_counts_its_hits_after_the_warm_up() -> None:
    """Twenty requests of the same two 16-token blocks (32-token prompts) on one instance: the first misses, every
    later one hits both blocks, 31 tokens (the prompt's last token is computed). The first two (a tenth) warm the
    cache: the hit ratio is 31/32 over the other 18, where the whole trace would give 19 · 31 / (20 · 32)."""
    trace = BlockTrace(np.arange(0, 41, 2, dtype=np.int64), np.tile([1, 2], 20).astype(np.int64), 16)
    setup = CacheSetup(CacheSpec(routing="load-balance"), None, (), (), Reuse(trace=trace))
    domain = Domain(hbm_tokens=6 * 16, kv_bytes_per_token=131_072.0, instances=1, instances_per_node=1, layers=32)
    classes = cache_classes(setup, domain, np.array([32.0]), 1.0, 0.0)
    assert classes.warmup_requests == 2
    assert classes.token_hit_ratio == pytest.approx(31 / 32, rel=1e-12)
    assert classes.weights[0] == pytest.approx([0.0, 1.0], abs=1e-12)  # no counted request misses
    doc = CacheReport.of(classes, mode="disaggregated").to_document(1.0)
    assert doc["hits_counted_after_requests"] == 2
    assert "hits_counted_after_requests" not in CacheReport("load-balance", 1.0, 0.5, ()).to_document(1.0)


@pytest.mark.parametrize("instances", [2, 3, 4])
def test_the_simulator_splits_a_trace_as_the_closed_form_does(instances: int) -> None:
    raw = load_mooncake_trace(TRACE, 512)
    trace = BlockTrace(raw.hash_offsets, raw.hash_ids, 512, prompt_tokens=raw.input_tokens)
    reqs = mooncake_requests(raw, 512, np.arange(raw.requests, dtype=float))
    routes = trace_routes(affinity_keys(reqs, instances), instances)
    assert np.array_equal(routes, affinity_owner(trace, instances))
    assert np.bincount(routes, minlength=instances).min() > 0
