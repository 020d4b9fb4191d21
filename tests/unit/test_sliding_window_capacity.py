"""The sliding window's KV cap in capacity (issue #25 item 6): a model whose every layer is windowed (Mistral-7B v0.1,
window 4,096) holds min(L, window) tokens of a sequence of L, in the spec's byte count, the queueing model's context
sums, the KV admission footprint, the simulator's active set and reservations, the benchmark loops and the P→D
transfer; its decode step law runs over the same windowed context. A hybrid (gpt-oss) and a dense model are
unchanged. Hand-worked numbers in each test."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.cli_result import CliResult

from pdplan.cache.dual_path import append_prefill_flops
from pdplan.io.catalog import open_catalog
from pdplan.io.hf_config import load_hf_config
from pdplan.queueing.decode import (
    DecodeWorkload,
    decode_workload,
    held_context_sums,
    kv_footprint,
    windowed_mean_context,
)
from pdplan.queueing.kv_admission import kv_held
from pdplan.report.catalog import model_show_view
from pdplan.serving.checks.decode_law import LAW_WARN_MAX_REL_ERR, LAW_WARN_MEDIAN_REL_ERR
from pdplan.sim.batch import ActiveSet
from pdplan.transfer.kv import kv_bytes_per_request, kv_transfer
from pdplan.transfer.kv_inputs import TransferConfig, kv_shape_from_model

MISTRAL = Path(__file__).parent / "data" / "hf" / "mistral-7b-v0.1.json"
PER_TOKEN = 131_072  # 32 layers x 8 K/V heads x (128 + 128) x 2 B


def _brute(lin: float, n: int, w: float) -> tuple[float, float]:
    held = [min(lin + j, w) for j in range(n)]
    return float(sum(held)), float(sum(h * h for h in held))


def test_mistral_caps_a_sequence_at_the_window_and_gpt_oss_stays_as_today() -> None:
    """Mistral: 32,768 tokens hold 4,096 x 131,072 = 536,870,912 B (was 4,294,967,296 B). gpt-oss-120b mixes window
    and global layers: no cap, its window layers stay a fixed state per sequence (18 x 128 tokens x 8 heads x 128 x
    2 x 2 B = 4,718,592 B) beside 18 global layers x 8 x 64 x ... per token, linear in L as before."""
    mistral = load_hf_config(MISTRAL)
    assert mistral.kv_window_tokens == 4096.0
    assert mistral.sequence_cache_bytes(32768, 2) == 536_870_912 == 4096 * PER_TOKEN
    gpt = open_catalog().model("gpt-oss-120b")
    assert gpt.kv_window_tokens is None
    state = gpt.sequence_state_bytes(2)
    assert state == gpt.window_kv_bytes_per_sequence(2) > 0.0
    per_token = gpt.kv_bytes_per_token(2)
    for tokens in (1_000.0, 32_768.0, 131_072.0):
        assert gpt.sequence_cache_bytes(tokens, 2) == state + tokens * per_token
    dense = open_catalog().model("llama-3.1-70b")
    assert dense.kv_window_tokens is None
    assert dense.sequence_cache_bytes(1000, 2, tp=8) == 40_960_000


@settings(deadline=None, max_examples=60)
@given(
    st.floats(1.0, 200_000.0, allow_nan=False),
    st.floats(0.0, 200_000.0, allow_nan=False),
    st.sampled_from([1, 2, 4, 8]),
)
def test_footprint_is_non_decreasing_in_length_and_at_most_every_token(a: float, b: float, tp: int) -> None:
    spec = load_hf_config(MISTRAL)
    lo, hi = sorted((a, b))
    assert spec.sequence_cache_bytes(lo, 2, tp) <= spec.sequence_cache_bytes(hi, 2, tp)
    every = hi * spec.kv_bytes_per_token(2) * max(1.0, tp / spec.num_kv_heads) / tp
    assert spec.sequence_cache_bytes(hi, 2, tp) <= every
    assert spec.sequence_cache_bytes(hi, 2, tp) == pytest.approx(min(hi, 4096.0) / hi * every)


@pytest.mark.parametrize(("lin", "n"), [(100, 50), (4000, 300), (4096, 7), (10_000, 40), (3000, 1), (0, 9000)])
def test_held_context_sums_match_the_step_by_step_sums(lin: int, n: int) -> None:
    """Σ_{j<n} min(L+j, w) and Σ min(L+j, w)²: e.g. L = 4,000, n = 300, w = 4,096: 96 steps below the window,
    384,000 + 4,560 + 835,584 = 1,224,144 token·steps."""
    first, square = held_context_sums(np.array([float(lin)]), np.array([float(n)]), 4096.0)
    assert (float(first[0]), float(square[0])) == pytest.approx(_brute(lin, n, 4096.0), rel=1e-12)
    if (lin, n) == (4000, 300):
        assert float(first[0]) == 1_224_144


def test_a_windowed_workload_sums_the_capped_context_and_an_unwindowed_one_is_unchanged() -> None:
    lin, n, p = np.array([1000.0, 8000.0]), np.array([200.0, 100.0]), np.array([0.25, 0.75])
    plain = decode_workload(lin, n, p)
    assert plain.mean_work == float(p @ (n * lin + n * (n - 1) / 2))
    assert plain.window_tokens is None
    assert kv_footprint(plain, 0.0) is plain
    wl = decode_workload(lin, n, p, 4096.0)
    work = [_brute(1000, 200, 4096.0), _brute(8000, 100, 4096.0)]
    assert wl.mean_work == pytest.approx(0.25 * work[0][0] + 0.75 * work[1][0], rel=1e-12)
    assert wl.context_square_sum == pytest.approx(0.25 * work[0][1] + 0.75 * work[1][1], rel=1e-12)
    assert list(wl.peak_tokens) == [1200.0, 4096.0]
    assert list(wl.bin_mean_context) == pytest.approx([1099.5, 4096.0])
    # fixed state s shifts context and window together: min(L + j, w) + s
    held = kv_footprint(wl, 10.0)
    assert held.window_tokens == 4106.0
    assert held.mean_work == pytest.approx(wl.mean_work + 10.0 * wl.mean_steps, rel=1e-12)


@pytest.mark.parametrize("reserve", [False, True])
def test_kv_admission_footprint_is_windowed(reserve: bool) -> None:
    """Growing: Σ_{j<n} (min(L+j, w) + s); reserved: n·(min(L+n, w) + s). L = 4,000, n = 300, s = 0: 1,224,144 resp.
    300·4,096 = 1,228,800."""
    wl = DecodeWorkload(np.array([4000.0]), np.array([300.0]), np.array([1.0]), None, 4096.0)
    held = kv_held(wl, 0.0, reserve=reserve)
    assert held.work == (1_228_800 if reserve else 1_224_144)
    plain = DecodeWorkload(np.array([4000.0]), np.array([300.0]), np.array([1.0]))
    assert kv_held(plain, 0.0, reserve=reserve).work == (300 * 4300 if reserve else 4000 * 300 + 300 * 299 / 2)


def test_the_simulators_active_set_reads_the_windowed_context() -> None:
    """Two sequences, window 10: prompts 6 and 12 (the second already capped). Context after s steps: min(6 + s, 10)
    + 10; the segment stops where the first one reaches the window (4 steps) so K stays linear within it."""
    seen: list[np.ndarray] = []

    def step(batch: np.ndarray, context: np.ndarray) -> np.ndarray:
        seen.append(context.copy())
        return np.full(batch.shape, 1.0)

    act = ActiveSet(step, 10.0)
    act.add(0, 6, 20)
    act.add(1, 12, 30)
    assert act.context() == 16.0
    assert list(act.segment()) == [1.0, 2.0, 3.0, 4.0]
    assert list(seen[-1]) == [16.0, 17.0, 18.0, 19.0]
    act.s += 4
    assert act.context() == 20.0
    act.segment()
    assert set(seen[-1].tolist()) == {20.0}
    act.s += 16
    assert act.pop_finished() == [0]
    assert act.context() == 10.0
    plain = ActiveSet(step)
    plain.add(0, 6, 20)
    plain.add(1, 12, 30)
    plain.s += 5
    assert plain.context() == 6 + 12 + 2 * 5


def test_transfer_moves_the_window_the_decode_keeps() -> None:
    """Request- and layer-wise: min(L, w) tokens, 536,870,912 B at 32k; chunk-wise the chunks stream while the prompt
    is computed, every token (4,294,967,296 B)."""
    shape = kv_shape_from_model(load_hf_config(MISTRAL), 2.0)
    assert shape.window_tokens == 4096.0
    assert float(kv_bytes_per_request(np.array(32768.0), shape)) == 536_870_912
    assert float(kv_bytes_per_request(np.array(1000.0), shape)) == 1000 * PER_TOKEN
    link = open_catalog().link("ib-ndr")
    prefill = np.array([2.0])
    sent = {
        g: float(kv_transfer(np.array([32768.0]), shape, link, cfg, prefill_time_s=prefill).bytes[0])
        for g, cfg in (
            ("request", TransferConfig()),
            ("layer", TransferConfig(granularity="layer")),
            ("chunk", TransferConfig(granularity="chunk", chunk_tokens=2048, prefill_hbm_bytes_per_s=3.35e12)),
        )
    }
    assert sent == {"request": 536_870_912, "layer": 536_870_912, "chunk": 4_294_967_296}


def test_windowed_mean_context_is_the_mean_of_the_capped_context() -> None:
    """Mean of min(L + x, w) over x in [0, span]: L = 4,000, span = 256, w = 4,096: (96·4,000 + 96²/2 + 160·4,096)
    /256 = 4,078."""
    assert windowed_mean_context(4000.0, 256.0, None) == 4128.0
    assert windowed_mean_context(4000.0, 256.0, 4096.0) == 4078.0
    assert windowed_mean_context(16000.0, 256.0, 4096.0) == 4096.0
    assert windowed_mean_context(1000.0, 256.0, 4096.0) == 1128.0
    xs = np.linspace(0.0, 256.0, 200_001)
    assert windowed_mean_context(4000.0, 256.0, 4096.0) == pytest.approx(float(np.minimum(4000.0 + xs, 4096).mean()))


def test_mistral_decode_law_fits_the_windowed_roofline(cli: Callable[..., CliResult]) -> None:
    """Mistral-7B 2P1D TP1 at 16k input: the law over total context missed its roofline by 32 % median, 163 % max
    (flat beyond the window) and warned; over the windowed context it fits within the kernel targets."""
    out = cli(
        "evaluate", "--model", MISTRAL, "--tp", "1", "--xpyd", "2P1D", "--isl", "16000", "--osl", "256",
        "--rate", "1", "--format", "json",
    )  # fmt: skip
    assert out.code == 0, out.err
    doc = json.loads(out.out)
    assert doc["assumptions"]["decode_fit_median_rel_err"] <= LAW_WARN_MEDIAN_REL_ERR
    assert doc["assumptions"]["decode_fit_max_rel_err"] <= LAW_WARN_MAX_REL_ERR
    assert not any(w.startswith("decode step law") for w in doc["warnings"])
    assert "decode step law" not in out.err


def test_dual_path_append_attends_over_the_window() -> None:
    """Mistral-7B (no global layer: num_kv_layers 0, which priced no attention at all before), 1,000 tokens appended
    after 10,000 cached: each of the 32 window layers attends to 4,096 keys per token, 2·32 heads·(128 + 128)·4,096
    FLOPs per layer and token. After 3,000 cached all 1,000 stay within the window (mean keys 3,000 + 1,001/2);
    after 3,500, m = 596 do and 404 attend to 4,096."""
    spec = load_hf_config(MISTRAL)
    assert spec.num_kv_layers == 0
    linear = 2 * spec.active_non_embedding_params()
    per_key = 2 * 32 * (128 + 128)
    far = append_prefill_flops(spec, 1000, 10_000)
    assert far == pytest.approx(1000 * (linear + 32 * per_key * 4096), rel=1e-12)
    near = append_prefill_flops(spec, 1000, 3000)
    assert near == pytest.approx(1000 * (linear + 32 * per_key * (3000 + 1001 / 2)), rel=1e-12)
    straddle = append_prefill_flops(spec, 1000, 3500)  # 596 tokens below the window, 404 at it
    keys = (596 * 3500 + 596 * 597 / 2 + 404 * 4096) / 1000
    assert straddle == pytest.approx(1000 * (linear + 32 * per_key * keys), rel=1e-12)
    assert near < straddle < far


def test_models_show_displays_the_window() -> None:
    """Mistral-7B: 4,096 tokens on 32 of 32 layers, held as min(L, 4,096); gpt-oss-120b: 128 on 18 of 36 layers,
    18·128 tokens·8 heads·(64 + 64)·2 B = 4,718,592 B of window K/V per sequence; Llama: no rows."""
    rows = {r["field"]: r["value"] for r in model_show_view(load_hf_config(MISTRAL)).records}
    assert rows["sliding_window_tokens"] == 4096
    assert rows["sliding_window_layers"] == "32 of 32 (a sequence holds min(L, 4,096) tokens)"
    gpt = {r["field"]: r["value"] for r in model_show_view(open_catalog().model("gpt-oss-120b")).records}
    assert gpt["sliding_window_tokens"] == 128
    assert gpt["sliding_window_layers"] == "18 of 36 (4,718,592 B (bf16) of window K/V per sequence)"
    llama = [r["field"] for r in model_show_view(open_catalog().model("llama-3.1-8b")).records]
    assert not any(f.startswith("sliding_window") for f in llama)
