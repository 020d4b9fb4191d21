"""DualPath's storage → DRAM stage before the prefill queue (:mod:`pdplan.serving.dual_path_setup`, **the load**):
a request's hit read over one node's storage NIC at ``min(S, M)``, plus the M/G/1 mean wait at the SNICs' fluid
utilisations, split by the share f of reads over the decode path; the prefill instance holds the buffer → GPU hop
alone. Hand-worked numbers, then the example's (examples/agent-dualpath.yaml: 2P4D nodes of 8 B200, a 3FS pool
behind one 12.5 GB/s storage NIC per node, hardware_db/storage/remote-3fs-100g.yaml)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import load_scenario
from pdplan.queueing.erlang import erlang_c
from pdplan.queueing.link_delay import BinDelay, no_delay, tail_bands
from pdplan.serving.build import build_model, with_cache_rate
from pdplan.serving.disaggregated import DisaggregatedModel
from pdplan.serving.dual_path_setup import StorageReadStage, add_read_wait, exponential_band_means
from pdplan.serving.resolve import resolve

ROOT = Path(__file__).parents[2]
SNIC = 12.5e9
"""remote-3fs-100g's read_bytes_per_s, per node (hardware_db/storage/remote-3fs-100g.yaml)."""


def test_stage_by_hand() -> None:
    # 0.1 s of transfer; E[X²]/(2E[X]) = 0.05 s; at 25 req/s the PE SNIC at 0.5, the DE SNIC at 0.25
    stage = StorageReadStage(np.array([[0.1]]), 0.05, (0.02, 0.01), 2.0 / 3.0, 1)
    # W_PE = 0.5/0.5 · 0.05 = 0.05; W_DE = 0.25/0.75 · 0.05 = 1/60; mean = 0.05/3 + (2/3)/60 = 1/36
    assert stage.wait_s(np.array([25.0]))[0] == pytest.approx(1.0 / 36.0, rel=1e-12)
    assert stage.fixed_s(1)[0, 0] == pytest.approx(0.1, rel=1e-12)
    assert stage.wait_law(np.array([25.0]), 1).bin_mean_s[0, 0] == pytest.approx(1.0 / 36.0, rel=1e-12)
    # PPD's decode class appended to the bin reads nothing: no transfer, no wait
    assert stage.fixed_s(2)[:, 0] == pytest.approx([0.1, 0.0], rel=1e-12)
    assert stage.wait_law(np.array([25.0]), 2).bin_mean_s[0] == pytest.approx([1.0 / 36.0, 0.0], rel=1e-12)
    assert stage.mean_s(25.0, np.array([0.5, 0.5])) == pytest.approx((0.1 + 1.0 / 36.0) / 2, rel=1e-12)
    with pytest.raises(ValueError, match="asked for 3"):
        stage.fixed_s(3)
    assert stage.mean_s(25.0, np.array([1.0])) == pytest.approx(0.1 + 1.0 / 36.0, rel=1e-12)
    assert stage.wait_s(np.array([0.0]))[0] == 0.0
    assert math.isinf(stage.wait_s(np.array([50.0]))[0])  # the PE SNIC full: no finite wait
    # f = 0: the DE SNIC carries nothing and its term drops out (even where its utilisation would be past 1)
    alone = StorageReadStage(np.array([[0.1]]), 0.05, (0.02, 1.0), 0.0, 1)
    assert alone.wait_s(np.array([25.0]))[0] == pytest.approx(0.05, rel=1e-12)


def test_wait_law_by_hand() -> None:
    # the stage above at 25 req/s: PE SNIC at 0.5 (share 1/3), DE SNIC at 0.25 (share 2/3), R = 0.05 s, c = 1 each
    stage = StorageReadStage(np.array([[0.1]]), 0.05, (0.02, 0.01), 2.0 / 3.0, 1)
    law = stage.wait_law(np.array([25.0]), 1, points=8)
    _, widths = tail_bands(8)
    factors = exponential_band_means(8)
    # atom 1 − (1/3)·0.5 − (2/3)·0.25 = 2/3; E[W | W > 0] = R/(1 − ρ): 0.1 s (PE), 1/15 s (DE)
    assert law.weights[0, 0, 0] == pytest.approx(2.0 / 3.0, rel=1e-12)
    assert law.points_s[0, 0, 0] == 0.0
    assert law.weights[0, 0, 1:] == pytest.approx(np.concatenate((widths / 6, widths / 6)), rel=1e-12)
    assert law.points_s[0, 0, 1:] == pytest.approx(np.concatenate((0.1 * factors, factors / 15)), rel=1e-12)
    # its mean is the mean wait the stage priced before the law, 1/36 s
    assert law.bin_mean_s[0, 0] == pytest.approx(1.0 / 36.0, rel=1e-12)
    # DualPath's rule over 3 SNICs at 0.5: P_w = C(3, 1.5) = 9/38, E[W | W > 0] = 0.05/(3·0.5) = 1/30, mean 3/380
    rule = StorageReadStage(np.array([[0.1]]), 0.05, (0.01, 0.01), 0.5, 1, 1.0, None, 2, 3)
    pooled = rule.wait_law(np.array([50.0]), 1, points=8)
    assert pooled.weights[0, 0, 0] == pytest.approx(29.0 / 38.0, rel=1e-12)
    assert pooled.points_s[0, 0, 1:] == pytest.approx(factors / 30, rel=1e-12)
    assert pooled.bin_mean_s[0, 0] == pytest.approx(3.0 / 380.0, rel=1e-12)
    # nothing read (R = 0) or no load: an atom 1 at 0
    idle = stage.wait_law(np.array([0.0]), 1)
    assert idle.bin_mean_s[0, 0] == 0.0
    assert idle.weights[0, 0, 0] == pytest.approx(1.0, abs=1e-15)


def test_exponential_band_means_by_hand() -> None:
    # tail_bands(8)'s edges 1 − (1 − j/8)²: the first band [0, 15/64], the last [63/64, 1]
    factors = exponential_band_means(8)
    _, widths = tail_bands(8)
    # E[Y | band] = 1 + ((1 − b)ln(1 − b) − (1 − a)ln(1 − a))/(b − a) for the unit exponential
    assert factors[0] == pytest.approx(1.0 + (49.0 / 64.0) * math.log(49.0 / 64.0) / (15.0 / 64.0), rel=1e-12)
    assert factors[-1] == pytest.approx(1.0 + math.log(64.0), rel=1e-12)
    assert float(widths @ factors) == pytest.approx(1.0, rel=1e-14)  # the tail keeps its mean
    assert np.all(np.diff(factors) > 0)


def test_add_read_wait_by_hand() -> None:
    link = BinDelay(np.array([[[0.0, 1.0]]]), np.array([[[0.5, 0.5]]]))
    wait = BinDelay(np.array([[[0.0, 2.0]]]), np.array([[[0.75, 0.25]]]))
    both = add_read_wait(link, wait)
    assert both.points_s[0, 0] == pytest.approx([0.0, 2.0, 1.0, 3.0])
    assert both.weights[0, 0] == pytest.approx([0.375, 0.125, 0.375, 0.125])
    assert both.bin_mean_s[0, 0] == pytest.approx(1.0, rel=1e-12)  # 0.5 + 0.5
    assert add_read_wait(no_delay(1), wait) is wait


def _model(tmp_path: Path, **cache: Any) -> DisaggregatedModel:
    doc: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "agent-dualpath.yaml").read_text())
    doc["cache"] |= cache
    path = tmp_path / "case.yaml"
    path.write_text(yaml.safe_dump(doc))
    model = build_model(with_cache_rate(resolve(load_scenario(path), open_catalog()), 20.0))
    assert isinstance(model, DisaggregatedModel)
    return model


def test_the_example_stage_at_the_optimal_split(tmp_path: Path) -> None:
    model = _model(tmp_path)
    stage, classes = model.storage_read, model.cache
    assert stage is not None
    assert classes is not None
    pool = next(t for t in classes.tiers if t.name == "remote-3fs-100g")
    # the deployment's pool bytes per request: 2 instances' reads over the rate the classes hold at
    per_request = pool.read_bytes_per_s * 2 / classes.rate_rps
    # every byte crosses one SNIC into DRAM at min(12.5, 500) GB/s (within 1 %: the pool's traffic counts each
    # class's mean hit, the stage each quadrature point's hit capped at its prompt less one token)
    assert stage.mean_s(0.0, model.input_prob) == pytest.approx(per_request / SNIC, rel=0.01)
    # f = 2/3 balances the SNICs: PE (1/3)·R/(2S) = DE (2/3)·R/(4S) = R/(6S), R = per_request × λ
    assert stage.de_fraction == pytest.approx(2.0 / 3.0, rel=1e-12)
    assert stage.snic_utilisation_per_rps == pytest.approx((per_request / (6 * SNIC),) * 2, rel=1e-9)
    # E[X]/2 <= E[X²]/(2E[X]) <= max X / 2 (requests that read nothing add to neither moment)
    mean_s = stage.mean_s(0.0, model.input_prob)
    assert mean_s / 2 * (1 - 1e-9) <= stage.residual_s <= float(stage.transfer_s.max()) / 2 * (1 + 1e-9)
    rho = 20.0 * per_request / (6 * SNIC)
    # the prefill node's SNIC an M/G/1; a decode-path read takes the least-loaded of the 4 decode nodes' SNICs, one
    # M/G/4 queue (Allen–Cunneen: R·C(4, 4ρ)/(4(1 − ρ)))
    assert (stage.decode_servers, stage.pooled_servers) == (4, 0)
    w_pe = rho / (1 - rho) * stage.residual_s
    w_de = stage.residual_s * float(erlang_c(4, 4 * rho)[0]) / (4 * (1 - rho))
    assert w_de < w_pe / 5
    assert stage.wait_s(np.array([20.0]))[0] == pytest.approx(w_pe / 3 + 2 * w_de / 3, rel=1e-9)
    # the prefill holds the buffer → GPU hop alone: 8 GPUs × min(PCIe 50 GB/s, ib-ndr's 50 GB/s × 0.87) per
    # instance (hardware_db/storage/remote-3fs-100g.yaml, hardware_db/links/ib-ndr.yaml)
    tier = next(t for t in classes.load_from if t is not None and t.name == "remote-3fs-100g")
    assert tier.bottleneck_bytes_per_s == pytest.approx(8 * 43.5e9, rel=1e-12)
    parts = model.ttft_parts(20.0)
    assert parts.cache_load_s == pytest.approx(stage.mean_s(20.0, model.input_prob), rel=1e-12)
    # the TTFT law carries the wait's law, whose mean is the mean wait: the snapshot's mean is the parts' sum
    assert model.snapshot(np.array([20.0])).ttft.mean_s[0] == pytest.approx(parts.total_s, rel=1e-9)


def test_decode_path_and_dualpath_rule_waits_by_hand() -> None:
    # R = 0.05 s; at 25 req/s the PE SNIC at 0.5, each of the 2 decode SNICs at 0.25, f = 2/3
    stage = StorageReadStage(np.array([[0.1]]), 0.05, (0.02, 0.01), 2.0 / 3.0, 1, 1.0, None, 2)
    # Erlang B: B1 = 0.5/1.5 = 1/3, B2 = 0.5·(1/3)/(2 + 1/6) = 1/13; C(2, 0.5) = (2/13)/(2 − 0.5·12/13) = 1/10
    # W_DE = 0.05·0.1/(2·0.75) = 1/300; W_PE = 0.5/0.5·0.05; mean = 0.05/3 + (2/3)/300 = 17/900
    assert stage.wait_s(np.array([25.0]))[0] == pytest.approx(17.0 / 900.0, rel=1e-12)
    # DualPath's rule over 3 SNICs, each at 0.5 (50 req/s × 0.01): a = 1.5, B3 = 13.5/100.5, C(3, 1.5) = 9/38;
    # W = 0.05·(9/38)/(3·0.5) = 3/380
    rule = StorageReadStage(np.array([[0.1]]), 0.05, (0.01, 0.01), 0.5, 1, 1.0, None, 2, 3)
    assert rule.wait_s(np.array([50.0]))[0] == pytest.approx(3.0 / 380.0, rel=1e-12)
    assert math.isinf(rule.wait_s(np.array([100.0]))[0])  # every SNIC full


def test_the_example_rule_pools_its_six_snics(tmp_path: Path) -> None:
    stage = _model(tmp_path, dual_split="snic-balanced").storage_read
    assert stage is not None
    assert stage.pooled_servers == 6  # 2 prefill + 4 decode nodes
    pe, de = stage.snic_utilisation_per_rps
    assert pe == pytest.approx(de, rel=1e-12)  # the fluid split balances them
    rho = 20.0 * pe
    expected = stage.residual_s * float(erlang_c(6, 6 * rho)[0]) / (6 * (1 - rho))
    assert stage.wait_s(np.array([20.0]))[0] == pytest.approx(expected, rel=1e-9)


def test_prefill_reads_have_no_stage(tmp_path: Path) -> None:
    assert _model(tmp_path, read_paths="prefill").storage_read is None
