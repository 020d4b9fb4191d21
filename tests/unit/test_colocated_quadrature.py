"""The colocated prefill-first TTFT over each prompt bin's quadrature lengths (issue #22; *Lengths within a bin* of
pdplan.queueing.colocated_queue): hand-worked P-K wait and TTFT law on two cells of two points each, the degenerate
cases, and the serving model's prices at the scenario's quadrature lengths (pdplan.serving.colocated,
colocated_cache)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from support.chat_sessions import CHAT_SESSIONS

from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import load_scenario
from pdplan.queueing import LinearStepTime, colocated_distributions, decode_workload
from pdplan.queueing.ttft_mixture import TtftMixture
from pdplan.serving.build import build_model
from pdplan.serving.colocated import ColocatedModel
from pdplan.serving.resolve import resolve
from pdplan.serving.roles import cached_prefill_perf, prefill_perf
from pdplan.serving.session_spread import point_spread

CATALOG = open_catalog()
STEP = LinearStepTime(8e-3, 50e-6, 3.9e-8)
WL = decode_workload([500.0, 2000.0], [50.0, 200.0], [0.5, 0.5])
S = np.array([0.05, 0.2])
POINTS = np.array([[0.03, 0.07], [0.1, 0.3]])  # each row's mean is S: the bins' means kept
DRAM = {"storage": "host-dram-pcie5", "capacity": "2 TiB"}
SESSIONS = CHAT_SESSIONS


def test_prompt_queue_and_ttft_take_the_points_by_hand() -> None:
    # λ = 2: ρ_p = 2(.5·.05 + .5·.2) = .25 either way (each row's mean is the bin's S), so TPOT̄, τ_p and the step
    # rest v = τ_p/2·(1 − e^{−N}) = 3.906948 ms are those of test_queueing_colocated.test_prefill_first_by_hand.
    # E[S²] of the points: (.03² + .07² + .1² + .3²)/4 = .1058/4 = .02645 (the bins': (.05² + .2²)/2 = .02125)
    # P-K: E[W] = λE[S²]/(2(1 − ρ)) = 2·.02645/1.5 = 35.2667 ms (bins: 28.3333 ms)
    # mean TTFT = E[W] + v + E[S] = 35.2667 + 3.906948 + 125 = 164.1736 ms (bins: 157.2403 ms)
    r = colocated_distributions("prefill-first", [2.0], WL, STEP, prefill_service_s=POINTS)
    b = colocated_distributions("prefill-first", [2.0], WL, STEP, prefill_service_s=S)
    assert r.prefill_utilisation[0] == pytest.approx(0.25)
    assert r.tpot_mean_s[0] == pytest.approx(b.tpot_mean_s[0], rel=1e-12)
    assert r.ttft.mean_s[0] == pytest.approx(0.1641736, rel=1e-6)
    assert b.ttft.mean_s[0] == pytest.approx(0.1572403, rel=1e-6)
    assert r.ttft.wait.mean_s[0] - b.ttft.wait.mean_s[0] == pytest.approx(2 * (0.02645 - 0.02125) / 1.5, rel=1e-6)
    # P(TTFT ≤ a | c) = ½F(a − l_c0) + ½F(a − l_c1), F the law of W + rest
    a = 0.25
    got = r.ttft.cdf_per_bin(a)[0]
    f = r.ttft.wait.cdf_rowwise(a - POINTS[None, :, :])[0]
    np.testing.assert_allclose(got, f.mean(axis=1), rtol=1e-12)
    # the stalled TPOT's floor is the shortest service of the law over n steps: .03/50, .03/200 (bins: .05/n)
    np.testing.assert_allclose(r.tpot.comp_lo_s[1, 0], [0.03 / 50, 0.03 / 200], rtol=1e-12)
    np.testing.assert_allclose(b.tpot.comp_lo_s[1, 0], [0.05 / 50, 0.05 / 200], rtol=1e-12)


def test_ttft_steps_are_the_points_at_low_load() -> None:
    """λ = 10⁻³: the wait is 0 but for 2·10⁻⁴ of the prompts (ρ_p = 10⁻³·.125), and the step rest is at most
    τ_p ≈ 8 ms, present with probability 1 − e^{−N}, N = 10⁻³·125·8 ms = 10⁻³. So cell 1's TTFT is 0.1 or 0.3 s,
    half each: P(TTFT ≤ .2 | 1) = .5, its quartiles .1 and .3 s. Priced at its bin's .2 s (the point mass the
    quadrature replaces) the same cdf would be 1 and both quartiles .2 s."""
    one = decode_workload([2000.0], [200.0], [1.0])
    r = colocated_distributions("prefill-first", [1e-3], one, STEP, prefill_service_s=POINTS[1:])
    b = colocated_distributions("prefill-first", [1e-3], one, STEP, prefill_service_s=S[1:])
    assert r.ttft.cdf_per_bin(0.2)[0, 0] == pytest.approx(0.5, abs=1e-3)
    assert b.ttft.cdf_per_bin(0.2)[0, 0] == pytest.approx(1.0, abs=2e-3)
    assert r.ttft.quantile(0.25)[0] == pytest.approx(0.1, abs=1e-4)
    assert r.ttft.quantile(0.75)[0] == pytest.approx(0.3, abs=1e-4)
    assert b.ttft.quantile(0.25)[0] == pytest.approx(0.2, abs=1e-4)
    assert b.ttft.quantile(0.75)[0] == pytest.approx(0.2, abs=1e-4)


def test_one_point_per_cell_is_the_bins_law() -> None:
    """``[C, 1]`` is ``[C]`` exactly; J equal points are one point (to rounding of p/J)."""
    b = colocated_distributions("prefill-first", [2.0, 3.0], WL, STEP, prefill_service_s=S)
    one = colocated_distributions("prefill-first", [2.0, 3.0], WL, STEP, prefill_service_s=S[:, None])
    four = colocated_distributions("prefill-first", [2.0, 3.0], WL, STEP, prefill_service_s=np.repeat(S[:, None], 4, 1))
    for a in (0.1, 0.25, 0.5):
        assert np.array_equal(one.ttft.cdf_per_bin(a), b.ttft.cdf_per_bin(a))
        np.testing.assert_allclose(four.ttft.cdf_per_bin(a), b.ttft.cdf_per_bin(a), rtol=1e-9, atol=1e-12)
    assert np.array_equal(one.ttft.quantile(0.9), b.ttft.quantile(0.9))
    np.testing.assert_allclose(four.ttft.quantile(0.9), b.ttft.quantile(0.9), rtol=1e-9)
    np.testing.assert_allclose(four.tpot.quantile(0.9), b.tpot.quantile(0.9), rtol=1e-9)
    with pytest.raises(ValueError, match="one row of points"):
        colocated_distributions("prefill-first", [2.0], WL, STEP, prefill_service_s=POINTS.T[:1])


def _colocated(tmp_path: Path, cache: dict[str, Any] | None, scheduler: str = "prefill-first") -> ColocatedModel:
    doc: dict[str, Any] = {
        "schema_version": 1,
        "name": "colocated-points",
        "model": "llama-3.1-8b",
        "mode": "colocated",
        "workload": {"name": "chat", "sessions": SESSIONS},
        "slo": {"ttft": "1s", "tpot": "60ms"},
        "colocated": {"gpu": "h100-sxm", "tp": 1, "count": 2, "scheduler": scheduler},
    }
    if cache is not None:
        doc["cache"] = cache
    path = tmp_path / "colocated.yaml"
    path.write_text(yaml.safe_dump(doc))
    model = build_model(resolve(load_scenario(path), CATALOG))
    assert isinstance(model, ColocatedModel)
    return model


def test_plain_cells_are_priced_at_the_quadrature_lengths(tmp_path: Path) -> None:
    """Every prompt new: cell (i, j)'s row is the batch-1 prefill at bin i's quadrature lengths (the xPyD pool's
    points), the mean field's λE[S] the mean over them, and the snapshot's TTFT reads them per cell."""
    model = _colocated(tmp_path, {"prefix_caching": False})
    res = model.res
    points, n_out = res.input_points, res.lengths.output_tokens.size
    assert points.shape[1] > 1
    np.testing.assert_allclose(points.mean(axis=1), res.lengths.input_tokens, rtol=1e-9)
    hw = res.hardware.colocated
    want = prefill_perf(hw, points.ravel()).latency_s.reshape(points.shape)
    np.testing.assert_allclose(model.prefill_point_s, np.repeat(want, n_out, axis=0), rtol=1e-12)
    lam = 3.0
    assert model._u_prefill(lam) == pytest.approx(lam * float(model.cells.prob @ want.mean(axis=1).repeat(n_out)))
    out = model._distributions(np.array([2 * lam]))
    assert isinstance(out.ttft, TtftMixture)
    assert out.prefill_utilisation[0] == pytest.approx(model._u_prefill(lam), rel=1e-12)
    assert model.ttft_parts(2 * lam).prefill_s == pytest.approx(float(model.cells.prob @ model.prefill_cell_s))


def test_cached_cells_price_each_point_on_its_missed_tokens(tmp_path: Path) -> None:
    """With a prefix cache each (bin, class) cell is priced at its bin's quadrature lengths, the hit at most the
    point less one token (as the xPyD cached prefill side): each point computing its new
    tokens, a DRAM hit's exposed load against each point's own compute, added to that point's TTFT offset. A session
    hit is spread over the points (pdplan/serving/session_spread.py: the class's mean plus each point's offset)."""
    model = _colocated(tmp_path, {"routing": "load-balance", "tiers": [DRAM]})
    res = model.res
    assert model.cache is not None
    assert model.cell_input_bin is not None
    assert model.load_point_s is not None
    cells = model.cells
    assert cells.prefill_tokens is not None
    hw = res.hardware.colocated
    points = res.input_points[model.cell_input_bin]
    hits = cells.input_tokens - cells.prefill_tokens  # min(hit, rep − 1): the hit itself where below rep − 1
    exact = hits < cells.input_tokens - 1.0
    assert np.any(exact & (hits > 0))
    classes = model.cache
    assert classes.spread is not None
    k, h = classes.weights.shape
    offsets = point_spread(classes.spread, np.broadcast_to(res.input_points[:, None, :], (k, h, points.shape[1])))
    bins = model.cell_input_bin
    cls = np.array([int(np.argmin(np.abs(classes.hit_tokens[b] - x))) for b, x in zip(bins, hits, strict=True)])
    spread = offsets[bins, cls]
    assert np.any(np.abs(spread[exact]) > 1.0)
    cached = np.clip(np.minimum(hits[:, None] + spread, points - 1.0), 0.0, None)
    want = cached_prefill_perf(hw, points[exact], cached[exact]).latency_s
    np.testing.assert_allclose(model.prefill_point_s[exact], want, rtol=1e-12)
    assert np.any(model.load_point_s > 0.0)  # DRAM hits load
    assert np.all(model.load_point_s >= 0.0)
    assert model.load_cell_s is not None
    assert model.load_cell_s.shape == cells.prob.shape
    lam = 1.5
    base = model._queue(np.array([2 * lam])).ttft
    got = model._distributions(np.array([2 * lam])).ttft
    assert isinstance(got, TtftMixture)
    assert isinstance(base, TtftMixture)
    np.testing.assert_allclose(got.offsets_s - base.offsets_s, model.load_point_s[None], rtol=0, atol=1e-15)
    assert math.isfinite(float(got.quantile(0.9)[0]))


@pytest.mark.parametrize("scheduler", ["prefill-first", "chunked"])
@pytest.mark.parametrize("cache", [None, {"routing": "load-balance", "tiers": [DRAM]}])
def test_ttft_parts_sum_to_the_snapshots_mean(tmp_path: Path, scheduler: str, cache: dict[str, Any] | None) -> None:
    """The mean TTFT's parts add up to the snapshot's mean TTFT: the cache's exposed load rides in the cells'
    offsets, so the prefill part is the offsets' mean less the load, counted once (it was counted twice: a
    prefill-first DRAM case read 39.12 ms of parts against a 35.71 ms mean, the 3.42 ms load twice)."""
    model = _colocated(tmp_path, cache, scheduler)
    assert model.scheduler == scheduler
    rate = 3.0
    parts = model.ttft_parts(rate)
    mean = float(model.snapshot(np.array([rate])).ttft.mean_s[0])
    assert parts.total_s == pytest.approx(mean, rel=1e-12)
    assert (parts.cache_load_s > 0.0) == (cache is not None)
    assert parts.prefill_s > 0.0
