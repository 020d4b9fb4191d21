"""SGLang's disaggregated decode admission in the closed form (issue #23 item 5): its ``DecodePreallocQueue`` takes a
transferred request while the free KV, less ``num_reserved_decode_tokens`` R for every request it holds, fits the
prompt plus R, so every request counts its held context plus R (pdplan.queueing.kv_admission, module docstring).
The benchmark loop and the simulator follow that rule; these tests hold the closed form's decode KV limits to it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pdplan.io.catalog import open_catalog
from pdplan.io.engines import ENGINE_DIR
from pdplan.io.scenario import load_scenario
from pdplan.queueing import LinearStepTime, decode_workload
from pdplan.queueing.kv_admission import decode_server_footprint, kv_mean_rate, pd_decode_reserved_tokens
from pdplan.queueing.linear_capacity import fast_decode_capacity
from pdplan.serving.build import build_model
from pdplan.serving.disaggregated import DisaggregatedModel
from pdplan.serving.resolve import resolve
from pdplan.specs.engine import Scheduling

ROOT = Path(__file__).resolve().parents[2]
CATALOG = open_catalog()
SGLANG = CATALOG.engine("sglang").scheduling
STEP = LinearStepTime(8e-3, 50e-6, 3.9e-8)


def _without_reserve(sched: Scheduling) -> Scheduling:
    return sched.model_copy(update={"pd_decode_reserved_tokens": None})


def test_sglang_profile_reserves_512_tokens_a_request() -> None:
    assert pd_decode_reserved_tokens(SGLANG) == 512.0
    assert pd_decode_reserved_tokens(CATALOG.engine("vllm").scheduling) == 0.0
    assert pd_decode_reserved_tokens(CATALOG.engine("trtllm").scheduling) == 0.0


def test_footprint_by_hand() -> None:
    # L = 1000, n = 200, s = 0, R = 512: f_j = 1512 + j for j = 0..199
    wl = decode_workload([1000.0], [200.0], [1.0])
    held = decode_server_footprint(wl, 0.0, SGLANG)
    assert held.work == pytest.approx(200 * 1512 + 200 * 199 / 2)  # 322,300
    assert held.work == pytest.approx(322_300.0)
    # Σ (1512 + j)² = 200·1512² + 1512·200·199 + 199·200·399/6 = 457,228,800 + 60,177,600 + 2,646,700
    assert held.square_sum == pytest.approx(520_053_100.0)
    assert held.scv == 0.0
    # without R the SGLang decode server is priced on the growing context (219,900); TensorRT-LLM reserves (240,000)
    assert decode_server_footprint(wl, 0.0, _without_reserve(SGLANG)).work == pytest.approx(219_900.0)
    trtllm = CATALOG.engine("trtllm").scheduling
    assert decode_server_footprint(wl, 0.0, trtllm).work == pytest.approx(240_000.0)


def test_windowed_footprint_shifts_with_the_reserve() -> None:
    # window w = 1100, L = 1000, n = 200: held min(1000 + j, 1100) + 512; 100 steps grow, 100 sit at the window
    wl = decode_workload([1000.0], [200.0], [1.0], window_tokens=1100.0)
    held = decode_server_footprint(wl, 0.0, SGLANG)
    assert held.work == pytest.approx(sum(min(1000 + j, 1100) + 512 for j in range(200)))  # 317,350


def test_mean_kv_rate_by_hand() -> None:
    # t1 = t2 = 0: λ_kv = M/(t0·W) = 1e6/(0.02 × 322,300) = 155.15 req/s (growing: 1e6/(0.02 × 219,900) = 227.38)
    wl = decode_workload([1000.0], [200.0], [1.0])
    step = LinearStepTime(0.02, 0.0, 0.0)
    held = decode_server_footprint(wl, 0.0, SGLANG)
    assert kv_mean_rate(wl, held, step, 1e6) == pytest.approx(155.1350, rel=1e-5)


def test_prompt_plus_reserve_must_fit() -> None:
    # L = 1000, n = 100: the final footprint 1100 fits a 1,400-token pool, the admission's 1000 + 512 does not
    wl = decode_workload([1000.0], [100.0], [1.0])
    fits = fast_decode_capacity(wl, STEP, kv_capacity_tokens=1400.0, max_num_seqs=256, utilisation_max=0.85)
    assert fits.kv_rate_per_s > 0.0
    refused = fast_decode_capacity(
        wl, STEP, kv_capacity_tokens=1400.0, max_num_seqs=256, utilisation_max=0.85, reserved_tokens_per_seq=512.0
    )
    assert refused.max_rate_per_s == 0.0
    assert refused.binding == "kv"


def test_p99_kv_rate_counts_the_reserve_as_fixed_state() -> None:
    wl = decode_workload([500.0, 3000.0], [50.0, 300.0], [0.7, 0.3])
    kw = {"kv_capacity_tokens": 200_000.0, "max_num_seqs": 1e9, "utilisation_max": 0.85}
    with_r = fast_decode_capacity(wl, STEP, reserved_tokens_per_seq=512.0, **kw)
    as_state = fast_decode_capacity(wl, STEP, state_tokens_per_seq=512.0, **kw)
    plain = fast_decode_capacity(wl, STEP, **kw)
    assert with_r.kv_rate_per_s == pytest.approx(as_state.kv_rate_per_s, rel=1e-12)
    assert with_r.kv_rate_per_s < plain.kv_rate_per_s


def _distserve(engine: str) -> DisaggregatedModel:
    sc = load_scenario(ROOT / "examples" / "opt-13b-a100-distserve.yaml").model_copy(update={"engine": engine})
    model = build_model(resolve(sc, CATALOG))
    assert isinstance(model, DisaggregatedModel)
    return model


def _sglang_without_reserve(tmp_path: Path) -> str:
    doc = yaml.safe_load((ENGINE_DIR / "sglang.yaml").read_text(encoding="utf-8"))
    del doc["scheduling"]["pd_decode_reserved_tokens"]
    path = tmp_path / "sglang-no-reserve.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return str(path)


def test_closed_form_decode_limit_follows_the_pd_rule(tmp_path: Path) -> None:
    """DistServe's OPT-13B 1P1D (KV-bound) under SGLang: the mean (stability) KV limit is M/(t0 W + M·per) with W
    summed here from the cells, each request counting its context plus 512, and it sits below the same profile's
    limit without the reserve (growing context), as does the comfortable (P99) one."""
    model = _distserve("sglang")
    adm, cells, dec = model.admission, model.cells, model.decode
    assert adm is not None
    n, base = cells.decode_steps, cells.input_tokens + dec.state_tokens_per_seq + 512.0
    work = float(cells.prob @ (n * base + n * (n - 1.0) / 2.0))
    per = dec.step.t1_s_per_seq * cells.mean_steps + dec.step.t2_s_per_token * cells.mean_work
    by_hand = dec.kv_capacity_tokens / (dec.step.t0_s * work + dec.kv_capacity_tokens * per)
    assert adm.held.work == pytest.approx(work, rel=1e-12)
    assert adm.mean_rate_per_s == pytest.approx(max(by_hand, adm.comfort_rate_per_s), rel=1e-12)
    assert model.capacity.kv_rate_per_s == adm.comfort_rate_per_s
    plain = _distserve(_sglang_without_reserve(tmp_path))
    assert plain.admission is not None
    assert adm.mean_rate_per_s < plain.admission.mean_rate_per_s
    assert adm.comfort_rate_per_s < plain.admission.comfort_rate_per_s
    assert model.limit().rate_rps < plain.limit().rate_rps
