"""SGLang's disaggregated decode admission in the simulator (pdplan.sim.pd_decode_rule, pd_decode_instance), worked
out by hand on one decode instance with a constant 0.1 s step; convention B (prefill streams token 1, n = output − 1).
Both prompts' KV is ready at 1.0 s (two prefill instances of 1 s each, no transfer time)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from pdplan.errors import SpecError
from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import load_scenario
from pdplan.serving.build import build_model
from pdplan.serving.disaggregated import DisaggregatedModel
from pdplan.serving.resolve import resolve
from pdplan.sim import DecodePool, Disaggregated, PrefillPool, Requests, simulate
from pdplan.sim.deployment import host_link, pd_admission, sim_deployment
from pdplan.sim.pd_decode_rule import PdDecodeAdmission

STEP_S = 0.1


def _run(
    prompts: list[int], outputs: list[int], capacity: float, rule: PdDecodeAdmission | None
) -> tuple[np.ndarray, np.ndarray]:
    """(decode admission times, finish times) of the two requests."""
    dep = Disaggregated(
        prefill=PrefillPool(2, routing="round-robin", service_s=[1.0, 1.0]),
        decode=DecodePool(
            1, step_time_s=lambda b, k: np.full(np.shape(b), STEP_S), kv_capacity_tokens=capacity, pd_admission=rule
        ),
        convention="B",
    )
    res = simulate([0.0, 0.0], Requests.of(prompts, outputs), dep, np.random.default_rng(0), warmup_fraction=0.0)
    return np.asarray(res.decode_admit_s), np.asarray(res.finish_s)


def test_rule_admits_what_reservation_refuses() -> None:
    # M = 1,600, R = 100. r0: l = 500, n = 800; r1: l = 400, n = 200.
    # Reservation: r0 takes 1,300, r1 needs 600 > 300 left: r1 waits for r0's end at 1 + 80 = 81 s, ends at 101 s.
    # SGLang: r0 needs max(500 + 100, 500 + min(800, c) − 0) = 1,300 ≤ 1,600; then r1 has 1,600 − 500 − 1·100 = 1,000
    # allocatable (the one-request room over the running requests, none at this boundary, is 0) and needs
    # max(400 + 100, 400 + 200 − 0) = 600: admitted at 1 s, ends at 1 + 20 = 21 s. The pool then holds 900 + 2 a
    # step, at most 1,300 before r1 ends: no retraction.
    rule = PdDecodeAdmission(reserved_tokens=100, clip_tokens=4096)
    admit, finish = _run([500, 400], [801, 201], 1600.0, rule)
    np.testing.assert_allclose(admit, [1.0, 1.0])
    np.testing.assert_allclose(finish, [81.0, 21.0], rtol=1e-9)
    admit, finish = _run([500, 400], [801, 201], 1600.0, None)
    np.testing.assert_allclose(admit, [1.0, 81.0], rtol=1e-9)
    np.testing.assert_allclose(finish, [81.0, 101.0], rtol=1e-9)


def test_rule_refuses_what_reservation_admits() -> None:
    # M = 1,600, R = 512. r0: l = 500, n = 50; r1: l = 600, n = 50. Reservation: 550 + 650 = 1,200 ≤ 1,600, both at
    # 1 s. SGLang: r0 in (1,012 ≤ 1,600); r1 finds 1,600 − 500 − 512 = 588 allocatable against 600 + 512 = 1,112:
    # refused until r0 ends at 1 + 5 = 6 s (then 1,600 allocatable), ends at 11 s.
    rule = PdDecodeAdmission(reserved_tokens=512, clip_tokens=4096)
    admit, finish = _run([500, 600], [51, 51], 1600.0, rule)
    np.testing.assert_allclose(admit, [1.0, 6.0], rtol=1e-9)
    np.testing.assert_allclose(finish, [6.0, 11.0], rtol=1e-9)
    admit, _ = _run([500, 600], [51, 51], 1600.0, None)
    np.testing.assert_allclose(admit, [1.0, 1.0])


def test_one_request_room_refuses_while_it_binds() -> None:
    # SGLang's need_space_for_single_req: r0 (l = 300, n = 600) runs from 1 s; r1 (l = 200, n = 500) would fit
    # 1,000 − 300 − 100 = 600 on R alone (200 + 100), but a newcomer must also fit its l + min(n, c) less the running
    # requests' tokens (0 at 1 s: 700 > 600): refused until r0 ends at 61 s.
    rule = PdDecodeAdmission(reserved_tokens=100, clip_tokens=4096)
    admit, finish = _run([300, 200], [601, 501], 1000.0, rule)
    np.testing.assert_allclose(admit, [1.0, 61.0], rtol=1e-9)
    np.testing.assert_allclose(finish, [61.0, 111.0], rtol=1e-9)


def test_retraction_when_the_batch_outgrows_its_reserve() -> None:
    # The same two with c = 1 (the one-request room never binds): r1 needs max(300, 201) ≤ 600, both run from 1 s.
    # The pool holds 500 + 2k tokens after k steps; step k needs 2 more, so steps 0..249 fit and the boundary of step
    # 250 (26 s) retracts the fewest-output request: a tie at 250 outputs, the longer prompt r0 goes (context 550,
    # 350 steps left). r1 alone (450 tokens) runs its last 250 steps to 51 s; r0's 550 + 100 never fits beside it
    # (1,000 − 450 − 100 = 450), so it resumes at 51 s on the freed pool with nothing recomputed: 51 + 35 = 86 s.
    rule = PdDecodeAdmission(reserved_tokens=100, clip_tokens=1)
    admit, finish = _run([300, 200], [601, 501], 1000.0, rule)
    np.testing.assert_allclose(admit, [1.0, 1.0])
    np.testing.assert_allclose(finish, [86.0, 51.0], rtol=1e-9)


def test_retraction_and_resumption_stall_for_the_host_copy() -> None:
    # The same run with 1 ms a KV token to host or back: the boundary at 26 s offloads r0's 550 tokens, so r1's last
    # 250 steps start 0.55 s later and end at 51.55 s; the boundary there loads r0's 550 back, another 0.55 s before
    # its 35 s of steps: 51.55 + 0.55 + 35 = 87.10 s. Without a retraction the copy costs nothing (the first case's
    # times unchanged).
    rule = PdDecodeAdmission(reserved_tokens=100, clip_tokens=1, host_copy_s_per_token=1e-3)
    admit, finish = _run([300, 200], [601, 501], 1000.0, rule)
    np.testing.assert_allclose(admit, [1.0, 1.0])
    np.testing.assert_allclose(finish, [87.10, 51.55], rtol=1e-9)
    rule = PdDecodeAdmission(reserved_tokens=100, clip_tokens=4096, host_copy_s_per_token=1e-3)
    admit, finish = _run([500, 400], [801, 201], 1600.0, rule)
    np.testing.assert_allclose(finish, [81.0, 21.0], rtol=1e-9)


def test_prompt_plus_reserve_must_fit_the_pool() -> None:
    # l + n = 700 fits 1,000, l + R = 1,100 does not: the decode server could never admit it
    rule = PdDecodeAdmission(reserved_tokens=500, clip_tokens=4096)
    with pytest.raises(SpecError, match="reserved decode tokens"):
        _run([600, 100], [101, 11], 1000.0, rule)


def test_rule_parameters_are_checked() -> None:
    with pytest.raises(SpecError):
        PdDecodeAdmission(reserved_tokens=-1, clip_tokens=4096)
    with pytest.raises(SpecError):
        PdDecodeAdmission(reserved_tokens=512, clip_tokens=0)
    with pytest.raises(SpecError):
        PdDecodeAdmission(reserved_tokens=512, clip_tokens=4096, host_copy_s_per_token=-1.0)


def test_deployment_reads_the_profile() -> None:
    """The simulator learns the rule from the resolved engine profile: SGLang's R = 512 and clip 4096; vLLM and
    TensorRT-LLM none (their decode instances reserve, pdplan/sim/decode.py)."""
    catalog = open_catalog()
    assert pd_admission(catalog.engine("sglang").scheduling) == PdDecodeAdmission(512, 4096)
    assert pd_admission(catalog.engine("vllm").scheduling) is None
    assert pd_admission(catalog.engine("trtllm").scheduling) is None
    sc = load_scenario(Path(__file__).parents[2] / "examples" / "opt-13b-a100-distserve.yaml")
    model = build_model(resolve(sc.model_copy(update={"engine": "sglang"}), catalog))
    assert isinstance(model, DisaggregatedModel)
    setup = sim_deployment(model, np.array([600, 900]), np.array([200, 50]))
    assert isinstance(setup.deployment, Disaggregated)
    # the host copy: OPT-13B's bf16 KV, 2 × 40 layers × 5,120 × 2 bytes = 819,200 bytes a token, on one A100
    # (TP1, r = 1) over PCIe Gen4 (hardware_db/links/pcie4.yaml: 31.5 GB/s × 0.89 = 28.035 GB/s): 29.22 µs a token
    admission = setup.deployment.decode.pd_admission
    assert admission is not None
    assert (admission.reserved_tokens, admission.clip_tokens) == (512, 4096)
    assert admission.host_copy_s_per_token == pytest.approx(819_200 / 28.035e9, rel=1e-12)


def test_host_link_missing_is_an_error() -> None:
    """A decode GPU whose PCIe generation has no catalogue link cannot price the retraction offload: a clear error,
    no number invented."""
    catalog = open_catalog()
    sc = load_scenario(Path(__file__).parents[2] / "examples" / "opt-13b-a100-distserve.yaml")
    decode = resolve(sc.model_copy(update={"engine": "sglang"}), catalog).hardware.decode
    assert host_link(catalog, decode).name == "pcie4"
    gen7 = dataclasses.replace(decode, gpu=decode.gpu.model_copy(update={"pcie_gen": 7}))
    with pytest.raises(SpecError, match="no link 'pcie7'"):
        host_link(catalog, gen7)
