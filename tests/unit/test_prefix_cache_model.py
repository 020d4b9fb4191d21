"""The serving model's prefix cache (pdplan.serving.prefix_cache, colocated_cache, limits.cache_read_limit): hand
checks on small scenarios, disaggregated and colocated."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from support.chat_sessions import CHAT_SESSIONS

from pdplan.cache.trace import BlockTrace
from pdplan.evaluation.evaluate import evaluate
from pdplan.io.catalog import open_catalog
from pdplan.io.kv_offload import load_kv_offload
from pdplan.io.scenario import load_scenario
from pdplan.serving.build import build_model, with_cache_rate
from pdplan.serving.colocated import ColocatedModel
from pdplan.serving.colocated_build import resident_tokens
from pdplan.serving.prefix_cache import CacheSetup, Domain, Reuse, affinity_owner, cache_classes
from pdplan.serving.resolve import resolve
from pdplan.serving.roles import cached_chunk_price, chunk_price, prefill_split_s
from pdplan.specs.cache import CacheSpec
from pdplan.specs.reuse import SessionsSpec, SharedPrefixSpec
from pdplan.specs.scenario import Scenario

CATALOG = open_catalog()

SESSIONS = CHAT_SESSIONS


def _scenario(tmp_path: Path, mode: str, cache: dict[str, Any] | None, scheduler: str = "chunked") -> Scenario:
    doc: dict[str, Any] = {
        "schema_version": 1,
        "name": f"cache-{mode}",
        "model": "llama-3.1-8b",
        "mode": mode,
        "workload": {"name": "chat", "sessions": SESSIONS},
        "slo": {"ttft": "1s", "tpot": "60ms"},
    }
    if mode == "colocated":
        doc["colocated"] = {"gpu": "h100-sxm", "tp": 1, "count": 2, "scheduler": scheduler}
    else:
        doc |= {"prefill": {"gpu": "h100-sxm", "tp": 1, "count": 1}, "decode": {"gpu": "h100-sxm", "tp": 1, "count": 3}}
        doc |= {"link": "ib-ndr", "granularity": "layer"}
    if cache is not None:
        doc["cache"] = cache
    path = tmp_path / f"{mode}-{scheduler}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load_scenario(path)


def test_cached_chunk_price_without_a_prefix_is_chunk_price() -> None:
    sc = Scenario.model_validate(
        {
            "schema_version": 1,
            "name": "x",
            "model": "llama-3.1-8b",
            "mode": "colocated",
            "colocated": {"gpu": "h100-sxm", "tp": 1, "count": 1},
            "workload": {
                "name": "w",
                "input_tokens": {"dist": "fixed", "value": 1000},
                "output_tokens": {"dist": "fixed", "value": 10},
            },
            "slo": {"ttft": "1s", "tpot": "60ms"},
        }
    )
    hw = resolve(sc, CATALOG).hardware.colocated
    lens = np.array([100.0, 2048.0, 5000.0, 9000.0])
    plain = chunk_price(hw, 2048.0, lens)
    cached = cached_chunk_price(hw, 2048.0, lens, np.zeros_like(lens))
    assert cached.s_per_token == plain.s_per_token
    np.testing.assert_allclose(cached.attention_s, plain.attention_s, rtol=1e-12)
    np.testing.assert_allclose(cached.drain_s, plain.drain_s, rtol=1e-12)
    # a cached prefix leaves fewer tokens to chunk, each attending to more keys: the 9000-token prompt with 7000
    # cached computes 2000 tokens in one chunk whose attention covers 2000·(2·7000 + 2000)/2 pairs
    half = cached_chunk_price(hw, 2048.0, np.array([9000.0]), np.array([7000.0]))
    eq = np.sqrt(2000.0 * (2 * 7000.0 + 2000.0))
    _, attention = prefill_split_s(hw, np.array([eq]))
    assert half.attention_s[0] == pytest.approx(float(attention[0]), rel=1e-9)


@pytest.mark.parametrize(
    ("mode", "scheduler"), [("disaggregated", "chunked"), ("colocated", "chunked"), ("colocated", "prefill-first")]
)
def test_cache_off_is_the_model_without_reuse_pricing(tmp_path: Path, mode: str, scheduler: str) -> None:
    """prefix_caching: false prices every prompt in full: the goodput rises with the cache on, never falls."""
    on = evaluate(_scenario(tmp_path, mode, {"routing": "affinity"}, scheduler))
    off = evaluate(_scenario(tmp_path, mode, {"prefix_caching": False}, scheduler))
    assert off.cache is None
    assert on.cache is not None
    assert on.cache.goodput_without_cache_rps == pytest.approx(off.goodput_rps, rel=1e-9)
    assert 0.0 < on.cache.token_hit_ratio < 1.0
    assert on.goodput_rps > off.goodput_rps


def test_colocated_cells_split_by_class_keep_the_workload(tmp_path: Path) -> None:
    """Each colocated cell splits into its classes: probabilities still sum to 1, the KV context is the whole
    prompt, the computed tokens are the prompt less the class's hit (at least one), and the prefill utilisation is
    that of the computed tokens only."""
    sc = _scenario(tmp_path, "colocated", {"routing": "affinity"}, "prefill-first")
    res = resolve(sc, CATALOG)
    model = build_model(res)
    assert isinstance(model, ColocatedModel)
    assert model.cache is not None
    cells = model.cells
    classes = model.cache.classes
    n_in, n_out = res.lengths.input_tokens.size, res.lengths.output_tokens.size
    assert cells.prob.size <= n_in * classes * n_out  # classes of < 1e-4 of their bin are folded away
    assert model.cell_input_bin is not None
    per_bin = np.bincount(model.cell_input_bin, weights=cells.prob, minlength=n_in)
    np.testing.assert_allclose(per_bin, res.lengths.input_marginal(), rtol=1e-12, atol=1e-15)
    assert float(cells.prob.sum()) == pytest.approx(1.0, abs=1e-12)
    assert cells.prefill_tokens is not None
    assert np.all(cells.prefill_tokens >= 1.0)
    assert np.all(cells.prefill_tokens <= cells.input_tokens)
    hit_share = 1.0 - float(cells.prob @ cells.prefill_tokens) / float(cells.prob @ cells.input_tokens)
    assert hit_share == pytest.approx(model.cache.token_hit_ratio, abs=0.02)
    lam = 1.0
    assert model._u_prefill(lam) == pytest.approx(lam / model.z * float(cells.prob @ model.prefill_cell_s) * model.z)


def test_cache_read_bandwidth_binds_when_the_path_is_slow(tmp_path: Path) -> None:
    """A DRAM tier read through a path throttled to 1 kB/s saturates it first: the stability limit is the rate at
    which its read traffic (proportional to the rate at fixed hit rates) fills the path, named with the tier and the
    element. (HBM holds nearly every history here, the sessions sharing their system prompt: DRAM serves a few
    millionths of the tokens.)"""
    storage = yaml.safe_load(Path("hardware_db/storage/host-dram-pcie5.yaml").read_text())
    storage["name"] = "slow-dram"
    storage["read_bytes_per_s"] = storage["gpu_path_bytes_per_s"] = "1 kB/s"
    slow = tmp_path / "slow-dram.yaml"
    slow.write_text(yaml.safe_dump(storage))
    tiers = [{"storage": str(slow), "capacity": "1 TiB"}]
    sc = _scenario(tmp_path, "colocated", {"routing": "affinity", "tiers": tiers})
    model = build_model(with_cache_rate(resolve(sc, CATALOG), 20.0))
    assert model.cache is not None
    tier = next(t for t in model.cache.tiers if t.name == "slow-dram")
    element, worst = max(tier.path_utilisation.items(), key=lambda kv: kv[1])
    limit = model.limit()
    assert limit.binding == f"cache read bandwidth (slow-dram: {element})"
    assert limit.rate_rps == pytest.approx(20.0 / worst, rel=1e-12)
    assert tier.read_bytes_per_s * limit.rate_rps / 20.0 <= 1e3 * (1 + 1e-9)  # the path's own bandwidth


def test_affinity_key_spreads_requests_that_share_a_system_prompt() -> None:
    """Every request opens with block 0 (one system prompt), then its conversation's own blocks: keyed on the first
    block alone all would reach one instance; the router's key grows until no instance gets more than 1.5x its share,
    and a conversation's turns (same second block) stay on one instance."""
    rng = np.random.default_rng(7)
    conversation = rng.integers(0, 200, size=2000)
    ids = np.stack([np.zeros(2000, np.int64), 1000 + conversation, 5000 + np.arange(2000)], axis=1).ravel()
    trace = BlockTrace(np.arange(0, 6001, 3, dtype=np.int64), ids.astype(np.int64), 16)
    owner = affinity_owner(trace, 4)
    counts = np.bincount(owner, minlength=4)
    assert counts.max() <= 1.5 * 2000 / 4
    for c in np.unique(conversation):
        assert np.unique(owner[conversation == c]).size == 1
    assert np.all(affinity_owner(trace, 1) == 0)


def _trace_setup(inclusion: str, dram_blocks: int, kvb: float) -> tuple[CacheSetup, Domain]:
    """Requests r0 = [1 2 3 4], r1 = [5 6 7 8], r2 = [1 2 3 4 9] (16-token blocks, whole-block prompts) on one
    instance with HBM for 6 blocks and host DRAM for ``dram_blocks`` (vLLM's offloading connector: inclusive;
    TensorRT-LLM's host offload: exclusive)."""
    trace = BlockTrace(
        np.array([0, 4, 8, 13], np.int64),
        np.array([1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 9], np.int64),
        16,
        prompt_tokens=np.array([64, 64, 80], np.int64),
    )
    name = "vllm-offloading-connector" if inclusion == "inclusive" else "trtllm-kv-reuse-host-offload"
    mechanism = next(m for m in load_kv_offload().mechanisms if m.name == name)
    storage = CATALOG.storage("host-dram-pcie5")
    setup = CacheSetup(
        CacheSpec(routing="load-balance"), mechanism, (storage,), (dram_blocks * 16 * kvb,), Reuse(trace=trace)
    )
    return setup, Domain(hbm_tokens=6 * 16, kv_bytes_per_token=kvb, instances=1, instances_per_node=1, layers=32)


@pytest.mark.parametrize(("inclusion", "dram_blocks"), [("inclusive", 16), ("exclusive", 10)])
def test_a_trace_hit_is_split_over_the_tiers_holding_its_blocks(inclusion: str, dram_blocks: int) -> None:
    """At r2's arrival the LRU stack is 8 7 6 5 4 3 2 1: blocks 4 and 3 sit at positions 4 and 5 (within HBM's 6),
    2 and 1 at 6 and 7 (the DRAM band, [6, 16) inclusive or [6, 6 + 10) exclusive). r2 hits 4 blocks, 64 tokens:
    32 from HBM, 32 from DRAM; its class is DRAM (the slowest tier it reaches) and only DRAM's 32 tokens are loaded.
    Of the 208 prompt tokens: 64 hit, 32 in each tier."""
    kvb = 131_072.0
    setup, domain = _trace_setup(inclusion, dram_blocks, kvb)
    classes = cache_classes(setup, domain, np.array([64.0, 80.0]), 1.0, 0.0)
    assert classes.names == ("miss", "hbm", "host-dram-pcie5")
    assert classes.weights.tolist() == [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    assert classes.hit_tokens[1, 2] == 64.0
    assert classes.tier_share[1, 2].tolist() == [0.0, 0.5, 0.5]
    assert classes.token_hit_ratio == pytest.approx(64 / 208, rel=1e-12)
    assert [t.token_hit_ratio for t in classes.tiers] == pytest.approx([32 / 208, 32 / 208], rel=1e-12)
    dram = classes.load_from[2]
    assert dram is not None
    compute = np.full((2, 3, 1), 1e-3)
    load = classes.exposed_load_s(np.full((2, 3, 1), 64.0), kvb, compute)
    assert load[1, 2, 0] == pytest.approx(float(dram.exposed_load_s(32.0, kvb, 1e-3, 32)), rel=1e-12)
    assert load[1, 2, 0] < float(dram.exposed_load_s(64.0, kvb, 1e-3, 32))
    assert np.all(load[:, :2] == 0.0)


def test_shared_prefixes_weigh_the_bins_by_their_own_layout() -> None:
    """Three prefixes of a uniform 1,000-3,000-token law, laid out at its quantiles 0.5, 0.118 and 0.736 (the
    golden-ratio sequence): about 2,000, 1,236 and 2,472 tokens, with Zipf (s = 1) shares 6/11, 3/11 and 2/11. With a
    200-token question and bins split at 2,250 tokens, the first two prefixes' prompts fall in bin 0 and the third's in
    bin 1: the classes weigh the bins 9/11 and 2/11, where the prompt law (prefix + question) gives them about 0.525
    and 0.475. Sessions, whose bins come from the prompt law itself, keep its marginal."""
    spec = SharedPrefixSpec.model_validate(
        {
            "num_prefixes": 3,
            "prefix_tokens": {"dist": "uniform", "min": 1000, "max": 3000},
            "question_tokens": {"dist": "fixed", "value": 200},
            "output_tokens": {"dist": "fixed", "value": 100},
            "popularity": {"kind": "zipf", "s": 1.0},
        }
    )
    setup = CacheSetup(CacheSpec(routing="load-balance"), None, (), (), Reuse(shared_prefix=spec))
    domain = Domain(hbm_tokens=1e5, kv_bytes_per_token=131_072.0, instances=1, instances_per_node=1, layers=32)
    classes = cache_classes(setup, domain, np.array([1500.0, 3000.0]), 1.0, 0.0)
    assert classes.joint is not None
    assert classes.joint.sum(axis=1) == pytest.approx([9 / 11, 2 / 11], rel=1e-12)
    marginal = np.array([0.525, 0.475])
    assert classes.bin_class_probability(marginal) is classes.joint
    assert np.allclose(classes.joint, classes.joint.sum(axis=1, keepdims=True) * classes.weights)
    sessions = dataclasses.replace(setup, reuse=Reuse(sessions=SessionsSpec.model_validate(SESSIONS)))
    per_turn = cache_classes(sessions, domain, np.array([1500.0, 3000.0]), 1.0, 0.0)
    assert per_turn.joint is None
    assert np.array_equal(per_turn.bin_class_probability(marginal), marginal[:, None] * per_turn.weights)


def test_classes_without_the_spread_are_the_same_classes() -> None:
    """``spread=False`` (the screen's per-bin prices) leaves out only the sessions' computed-token spread, which
    :func:`point_prices` alone reads: every other field the very doubles of the classes with it."""
    setup = CacheSetup(CacheSpec(), None, (), (), Reuse(sessions=SessionsSpec.model_validate(SESSIONS)))
    domain = Domain(hbm_tokens=3e4, kv_bytes_per_token=131_072.0, instances=1, instances_per_node=1, layers=32)
    reps = np.array([1500.0, 3000.0, 6000.0])
    full = cache_classes(setup, domain, reps, 4.0, 2.0)
    bare = cache_classes(setup, domain, reps, 4.0, 2.0, spread=False)
    assert full.spread is not None
    assert bare.spread is None
    for f in dataclasses.fields(full):
        if f.name != "spread":
            a, b = getattr(full, f.name), getattr(bare, f.name)
            assert np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b, f.name


def test_a_resent_prompt_is_loaded_but_its_last_token() -> None:
    """One 1,000-token prefix with U = 4 questions of 201 tokens resent in turn, at 2 requests/s into a cache that
    holds them all (HBM 1e6 tokens: T_C is infinite): every request finds its whole 1,201-token prompt and loads
    1,200 tokens of it, the engine computing the last (vLLM ``max_cache_hit_length = num_tokens - 1``). Without
    ``questions_per_prefix`` each question is new and only the prefix hits."""
    doc = {
        "num_prefixes": 1,
        "prefix_tokens": {"dist": "fixed", "value": 1000},
        "question_tokens": {"dist": "fixed", "value": 201},
        "output_tokens": {"dist": "fixed", "value": 100},
        "questions_per_prefix": 4,
    }
    domain = Domain(hbm_tokens=1e6, kv_bytes_per_token=131_072.0, instances=1, instances_per_node=1, layers=32)
    prompts = np.array([1201.0])
    resent = CacheSetup(CacheSpec(), None, (), (), Reuse(shared_prefix=SharedPrefixSpec.model_validate(doc)))
    classes = cache_classes(resent, domain, prompts, 2.0, 0.0)
    assert classes.weights[0].tolist() == pytest.approx([0.0, 1.0])
    assert classes.hit_tokens[0, 1] == pytest.approx(1200.0)
    new = dataclasses.replace(
        resent, reuse=Reuse(shared_prefix=SharedPrefixSpec.model_validate(doc | {"questions_per_prefix": None}))
    )
    assert cache_classes(new, domain, prompts, 2.0, 0.0).hit_tokens[0, 1] == pytest.approx(1000.0)


def test_a_repeated_prompt_list_is_served_cached_past_the_uncached_pole(tmp_path: Path) -> None:
    """A benchmark's fixed list of 100 prompts of 2,100 tokens resent in turn (inference-perf's shared_prefix data),
    Llama-3.1-8B on one H100. With every prompt computed the instance's mean field has its pole near 13 req/s; the
    prefix cache serves every repeat but its last token, so the cached deployment is stable well past it. Its HBM cache
    is the KV its own decoding sequences leave free (``build_colocated``'s fixed point), not the uncached model's,
    whose sequences fill the whole pool past that pole and would leave no cache at all."""
    doc: dict[str, Any] = {
        "schema_version": 1,
        "name": "resent-prompts",
        "model": "llama-3.1-8b",
        "mode": "colocated",
        "colocated": {"gpu": "h100-sxm", "tp": 1, "count": 1, "scheduler": "chunked"},
        "workload": {
            "name": "fixed-prompt-list",
            "shared_prefix": {
                "num_prefixes": 10,
                "questions_per_prefix": 10,
                "prefix_tokens": {"dist": "fixed", "value": 100},
                "question_tokens": {"dist": "fixed", "value": 2000},
                "output_tokens": {"dist": "fixed", "value": 100},
            },
        },
        "slo": {"ttft": "60s", "tpot": "10s", "percentile": 99},
    }
    path = tmp_path / "resent.yaml"
    path.write_text(yaml.safe_dump(doc))
    cached = evaluate(load_scenario(path))
    path.write_text(yaml.safe_dump(doc | {"cache": {"prefix_caching": False}}))
    plain = evaluate(load_scenario(path))
    assert cached.cache is not None
    assert cached.cache.token_hit_ratio > 0.99
    assert cached.stability_limit_rps > 1.5 * plain.stability_limit_rps
    # the HBM cache it reports is the KV its own sequences leave at the rate the hits hold at (within the 1 % stop)
    sc = Scenario.model_validate(doc)
    rate = cached.cache.rate_rps
    model = build_model(with_cache_rate(resolve(sc, CATALOG), rate))
    assert isinstance(model, ColocatedModel)
    free = model.decode.kv_capacity_tokens - resident_tokens(model, rate)
    assert cached.cache.tiers[0].capacity_tokens == pytest.approx(free, abs=0.01 * model.decode.kv_capacity_tokens)
