"""PPD's decode instances take the plain disaggregated decode's KV admission queue (issue #23 item 5,
pdplan.serving.ppd_decode.kv_admission): under SGLang each request counts its held context plus
``num_reserved_decode_tokens`` R, in the KV admission queue and in the stretched step's comfortable KV bound; under
vLLM the pinned queue of its preemptions, with the recompute stretched by the appends as the step is
(pdplan.serving.decode_recompute, *PPD's decode instances*); under TensorRT-LLM the reserved footprint's queue."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import load_scenario
from pdplan.queueing import LinearStepTime, decode_workload, tpot_distribution
from pdplan.queueing.kv_admission import (
    KvAdmission,
    RidingKvAdmission,
    decode_server_admission,
    decode_server_footprint,
    kv_held,
    kv_mean_rate,
    pinned_batch,
    pinned_decode_admission,
    recompute_tokens,
)
from pdplan.queueing.linear_capacity import fast_decode_capacity
from pdplan.serving.build import build_model, with_cache_rate
from pdplan.serving.decode_recompute import recompute_s
from pdplan.serving.disaggregated import unplaced_disaggregated
from pdplan.serving.limits import DECODE_U_MAX
from pdplan.serving.ppd_decode import scaled, stretch
from pdplan.serving.ppd_report import placement_of
from pdplan.serving.resolve import resolve
from pdplan.specs.cache import TurnPlacementSpec
from pdplan.types import Binding

EXAMPLE = Path(__file__).parents[2] / "examples" / "chat-ppd.yaml"
CATALOG = open_catalog()


def _ppd(engine: str, rate_rps: float = 10.0, policy: str = "ppd", **update: Any) -> Any:
    """The chat-ppd example under ``engine``, every held Turn 2+ on decode (``policy`` pd: none), at the hit rates of
    ``rate_rps`` (10 req/s); ``update``: more fields of the scenario."""
    sc = load_scenario(EXAMPLE)
    assert sc.cache is not None
    cache = sc.cache.model_copy(update={"turn_placement": TurnPlacementSpec(policy=policy)})
    sc = sc.model_copy(update={"cache": cache, "engine": engine, **update})
    res = with_cache_rate(resolve(sc, CATALOG), rate_rps)
    model = build_model(res)
    assert (placement_of(model) is not None) == (policy != "pd")
    return model


@pytest.mark.slow
def test_ppd_decode_counts_context_plus_reserve_under_sglang() -> None:
    model = _ppd("sglang")
    adm, dec, cells = model.admission, model.decode, model.cells
    assert adm is not None
    sched = model.res.engine.scheduling
    held = decode_server_footprint(cells, dec.state_tokens_per_seq, sched)
    assert adm.held == held
    # by hand: f_j = L + s + 512 + j, W = E[n(L + s + 512) + n(n − 1)/2]
    n, base = cells.decode_steps, cells.input_tokens + dec.state_tokens_per_seq + 512.0
    assert adm.held.work == pytest.approx(float(cells.prob @ (n * base + n * (n - 1.0) / 2.0)), rel=1e-12)
    assert adm.step == dec.step  # the step stretched by the appends' load
    mean = kv_mean_rate(cells, held, dec.step, dec.kv_capacity_tokens)
    assert adm.mean_rate_per_s == max(mean, adm.comfort_rate_per_s)
    kw = {
        "kv_capacity_tokens": dec.kv_capacity_tokens,
        "max_num_seqs": dec.max_num_seqs,
        "utilisation_max": DECODE_U_MAX,
        "state_tokens_per_seq": dec.state_tokens_per_seq,
    }
    with_r = fast_decode_capacity(cells, dec.step, reserved_tokens_per_seq=512.0, **kw)
    assert model.capacity.kv_rate_per_s == with_r.kv_rate_per_s == adm.comfort_rate_per_s
    assert with_r.kv_rate_per_s < fast_decode_capacity(cells, dec.step, **kw).kv_rate_per_s
    assert adm.held.work > kv_held(cells, dec.state_tokens_per_seq, reserve=False).work


@pytest.mark.slow
def test_ppd_decode_of_an_engine_without_reserve_is_the_plain_rule() -> None:
    """vLLM (no R): the growing context, as the plain disaggregated decode; TensorRT-LLM: the reserved one."""
    for engine, reserve in (("vllm", False), ("trtllm", True)):
        model = _ppd(engine)
        assert model.admission is not None
        expect = kv_held(model.cells, model.decode.state_tokens_per_seq, reserve=reserve)
        assert dataclasses.astuple(model.admission.held) == dataclasses.astuple(expect)


def _two_one(rate_rps: float, engine: str = "vllm", policy: str = "ppd") -> Any:
    """The chat-ppd example as 2P1D over InfiniBand NDR (``ib-ndr``): the decode instance's KV, not the 25 GbE link,
    sets the stability limit, at the hit rates of ``rate_rps``; ``policy`` pd: plain disaggregation's model."""
    sc = load_scenario(EXAMPLE)
    deployment = {
        "prefill": sc.prefill.model_copy(update={"count": 2}),
        "decode": sc.decode.model_copy(update={"count": 1}),
    }
    return _ppd(engine, rate_rps, policy, link="ib-ndr", **deployment)


def test_ppd_pinned_limit_by_hand() -> None:
    # tests/unit/test_decode_recompute.py's pool (n = 1, L = 100; t0 = 10 ms, t1 = 1 ms; M = 2,000, f = 0.5, r = 1 ms)
    # under appends of ρ_a = 0.2: the step (12.5 ms, 1.25 ms) and r' = 1.25 ms, so λ_pin = 2,000/(0.0125·100 +
    # 2,000·(1.25 ms + 0.5·1.25 ms)) = 2,000/5 = 400/s: the plain 500/s times 1 − ρ_a, on the time the appends leave
    one = decode_workload([100.0], [1.0], [1.0])
    held = kv_held(one, 0.0, reserve=False)
    step = scaled(LinearStepTime(10e-3, 1e-3, 0.0), 0.2)
    assert stretch(0.2) == pytest.approx(1.25, rel=1e-15)
    adm = pinned_decode_admission(one, held, step, 2000.0, 350.0, 0.5, 1e-3 * stretch(0.2))
    assert adm.mean_rate_per_s == pytest.approx(400.0, rel=1e-12)
    # τ̄ at 300/s with π = 0.1 preemptions a request: t0/(1 − ρ_a − λ(per + πr)) = 10 ms/(0.8 − 300·1.1 ms) = 21.28 ms
    tau = adm._tau(np.array([300.0]), np.array([0.1]))[0]
    assert tau == pytest.approx(10e-3 / (0.8 - 300.0 * 1.1e-3), rel=1e-12)


@pytest.mark.parametrize("rho", [0.0, 0.05, 0.3, 0.6])
@pytest.mark.parametrize("recompute_s_each", [1e-4, 1e-3, 1e-2])
def test_ppd_pinned_limit_never_exceeds_the_mean_occupancy_limit(rho: float, recompute_s_each: float) -> None:
    """On any stretch and recompute price the pinned limit is at most the fluid (mean-occupancy) limit on the same
    stretched step, and at most the unstretched pinned limit; above its P99 bound it is that limit times 1 − ρ_a."""
    wl = decode_workload([300.0, 900.0], [50.0, 150.0], [0.5, 0.5])
    held = kv_held(wl, 0.0, reserve=False)
    share, _, _ = recompute_tokens(wl, 0.0)
    plain = LinearStepTime(8e-3, 2e-4, 1e-7)
    step = scaled(plain, rho)
    adm = pinned_decode_admission(wl, held, step, 50_000.0, 1.0, share, recompute_s_each * stretch(rho))
    unstretched = pinned_decode_admission(wl, held, plain, 50_000.0, 1.0, share, recompute_s_each)
    assert adm.mean_rate_per_s <= kv_mean_rate(wl, held, step, 50_000.0)
    assert adm.mean_rate_per_s <= unstretched.mean_rate_per_s
    assert adm.mean_rate_per_s == pytest.approx((1.0 - rho) * unstretched.mean_rate_per_s, rel=1e-12)


@pytest.mark.slow
def test_ppd_decode_under_vllm_is_the_pinned_queue_on_the_stretched_step() -> None:
    """2P1D: the PPD model's KV queue is vLLM's pinned one on the step the appends stretch, its r the plain decode's
    recompute price (decode_recompute.recompute_s) stretched alike, and the plan's limits are the queue's."""
    model = _two_one(20.0)
    adm, dec, cells, placement = model.admission, model.decode, model.cells, model.pool.placement
    assert isinstance(adm, RidingKvAdmission)
    assert unplaced_disaggregated(model.res)[0].admission is None  # priced by place_turns alone
    plain = _two_one(20.0, policy="pd")
    assert placement.rho_append > 0.0
    assert adm.step == dec.step == scaled(plain.decode.step, placement.rho_append)
    assert adm.prefill_s_per_request == 0.0
    share, _, _ = recompute_tokens(cells, dec.state_tokens_per_seq)
    batch = pinned_batch(adm.held, cells, dec.kv_capacity_tokens)
    r = recompute_s(model.res.hardware.decode, cells, dec, batch, model.res.chunk_tokens)
    assert adm.overflow_share == share
    assert adm.recompute_s_per_preemption == pytest.approx(r * stretch(placement.rho_append), rel=1e-15)
    pinned = kv_mean_rate(cells, adm.held, dec.step, dec.kv_capacity_tokens, share * adm.recompute_s_per_preemption)
    fluid = kv_mean_rate(cells, adm.held, dec.step, dec.kv_capacity_tokens)
    assert adm.mean_rate_per_s == pytest.approx(pinned, rel=1e-12)
    assert adm.comfort_rate_per_s <= model.capacity.kv_rate_per_s < adm.mean_rate_per_s < fluid
    # the rate enters only as λ times a stretched time: both limits are plain disaggregation's times 1 − ρ_a
    assert isinstance(plain.admission, RidingKvAdmission)
    factor = stretch(placement.rho_append)
    assert adm.mean_rate_per_s * factor == pytest.approx(plain.admission.mean_rate_per_s, rel=1e-9)
    assert adm.comfort_rate_per_s * factor == pytest.approx(plain.admission.comfort_rate_per_s, rel=1e-9)
    limit = model.limit()
    assert limit.binding is Binding.DECODE_KV
    assert limit.rate_rps == pytest.approx(model.y * adm.mean_rate_per_s, rel=1e-12)
    assert limit.kv_comfort_rps == pytest.approx(model.y * adm.comfort_rate_per_s, rel=1e-12)
    # past the comfortable limit (only) TPOT carries the recompute's stretch and its victims' pause
    lam = np.array([0.9 * adm.comfort_rate_per_s, 0.5 * (adm.comfort_rate_per_s + adm.mean_rate_per_s)])
    tpot = tpot_distribution(lam, cells, dec.step)
    priced = model._recomputed(tpot, lam * model.y)
    stretch_s, pause_s = adm.recompute_s(lam)
    assert stretch_s[0] == pause_s[0] == 0.0 < stretch_s[1]
    assert pause_s[1] > 0.0
    steps = np.maximum(cells.decode_steps, 1.0)
    np.testing.assert_allclose(
        priced.offset_s, tpot.offset_s + stretch_s[:, None] + pause_s[:, None] / steps, rtol=1e-12
    )


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["trtllm", "sglang"])
def test_ppd_decode_of_engines_that_hold_requests_back_is_unchanged(engine: str) -> None:
    """TensorRT-LLM and SGLang hold a request back (no preemption): the plain queue on the stretched step."""
    model = _two_one(20.0, engine)
    adm, dec = model.admission, model.decode
    assert isinstance(adm, KvAdmission)
    sched = model.res.engine.scheduling
    expect = decode_server_admission(
        model.cells, dec.state_tokens_per_seq, sched, dec.step, dec.kv_capacity_tokens, model.capacity.kv_rate_per_s
    )
    assert adm == expect


@pytest.mark.slow
@pytest.mark.parametrize("rate_rps", [5.0, 12.0, 20.0])
def test_ppd_vllm_limit_never_exceeds_the_plain_limits(rate_rps: float) -> None:
    """At the hit rates of several rates: the PPD decode instance's stability limit is at most the fluid
    (mean-occupancy) limit on its stretched step and at most the unplaced (plain disaggregated) model's pinned limit,
    and the placed decode pool's limit at most the plain one's."""
    model = _two_one(rate_rps)
    adm, dec = model.admission, model.decode
    assert isinstance(adm, RidingKvAdmission)
    plain = _two_one(rate_rps, policy="pd")
    assert isinstance(plain.admission, RidingKvAdmission)
    assert adm.mean_rate_per_s <= kv_mean_rate(model.cells, adm.held, dec.step, dec.kv_capacity_tokens)
    assert adm.mean_rate_per_s <= plain.admission.mean_rate_per_s
    assert adm.comfort_rate_per_s <= plain.admission.comfort_rate_per_s
    assert model.decode_limit().rate_rps <= plain.decode_limit().rate_rps
