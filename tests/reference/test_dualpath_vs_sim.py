"""DualPath's storage read paths, closed form against the simulator (issue #24 items 2 and 6): the cases of
``benchmarks/dualpath_closed_form_vs_sim.py`` (docs/prefix_cache.md §10, "Closed form against the simulator").

``examples/agent-dualpath.yaml`` (DeepSeek-V3 FP8, B200, 2P4D nodes, a 3FS pool behind one 100 Gb/s storage NIC per
node, 157-turn agent sessions) with ``read_paths: dual`` at two splits: ``dual_split: 0`` (every read over the
prefill nodes, whose storage NICs bind) and ``optimal`` (2/3 of the reads over the decode nodes, drawn per request
by the simulator). The simulator (:mod:`pdplan.sim.storage_paths`) queues each read on the nodes' servers, sharing
none of the closed form's load coefficients (:mod:`pdplan.cache.dual_path`). Tolerance 10 % (closed / simulated − 1),
the issue's target:

* the saturation read rate: the closed form's ``read_limit_rps`` against the simulator's read queues alone driven
  past it (the benchmark's :func:`saturation_rps`);
* at 0.7 × the closed form's goodput (the closed form at the simulation's offered rate): the busiest storage NIC's
  utilisation, the P90 TTFT with both paths, and with prefill-only reads the P90 TTFT within 15 %
  (:data:`TOLERANCE_TTFT_PREFILL`); both P90 TTFTs are strict xfails under the preset's fixed think time, and held
  within 10 % with the think time uniform (:func:`test_ttft_p90_uniform_think`).

Both read a request's hit over one storage NIC into a DRAM buffer before its prefill queue (DualPath §4, §6.1); the
closed form adds the read and the wait's law at the SNICs' utilisations (the prefill node's an M/G/1, the decode
nodes' one M/G/D queue, each an atom at 0 and an exponential tail: :mod:`pdplan.serving.dual_path_setup`), the
simulator queues it. Before 2026-12-07 the closed form loaded the hit at the paths' fluid share (3 × one storage
NIC here) under the prefill, and its P90 TTFT with both paths was 32.6 % below the simulator's (a strict xfail then).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
TOLERANCE = 0.10
TOLERANCE_TTFT_PREFILL = 0.15
"""Prefill-only P90 TTFT (the benchmark: +11.2 %, 2,000 requests, with the SNIC wait at its mean): the SNICs are at
0.51–0.55 there, and the preset's fixed think time synchronises the simulated sessions, whose SNIC waits fall below
the M/G/1's (61 against 76 ms in the mean, measured). With the wait's law (:data:`PREFILL_TTFT_MISS`) the row is
+24.5 %, past this tolerance: a strict xfail."""
REQUESTS = 5000
"""5,000 requests since 2026-12-07 (was 1,500): with the decode step of DeepSeek-V3 DP8 EP8 as the minimum of two
lines (pdplan/serving/decode_lines.py), the simulated turns decode slower, the offered rate drops 27.7 -> 25.3
req/s and at 1,500 requests the optimal split's P90 TTFT (uniform think) read -12.9 % and its busiest SNIC utilisation
(fixed think) -11.6 %; at 5,000 (same seed) they read -9.3 % and -1.4 % (the 1,500-request figures the sample's
noise: the SNIC utilisation -1.5 % at 5,000 with the uniform think). Prefill-only: +8.4 % (uniform) and +27.0 %
(fixed, the strict xfail); optimal fixed -14.1 % (the strict xfail); saturation read rates within 1.5 %. Why the
uniform-think optimal row moved (-4.7 -> -9.3 %): docs/prefix_cache.md §10 (the decode side is priced; the
benchmark's zero-latency start, the seed and its 256-token blocks' hit rounding set the rest)."""
DUAL_TTFT_MISS = (
    "known miss since 2026-12-07: P90 TTFT with both paths 383 ms against 460 simulated (-16.9 %, 1,500 requests; "
    "373 against 434 ms, -14.1 %, at 5,000 with the concave decode law; -19.5 % with the "
    "SNIC wait at its mean). Within 10 % before pdplan.serving.session_spread: each prompt bin's spread of prompt "
    "lengths used to fall on the tokens computed (a 32K-token agent bin priced thousands of computed tokens at its "
    "short end), which widened the TTFT tail; it now falls on the hit tokens, as the simulator's turns have it. The "
    "SNIC wait's law (pdplan.serving.dual_path_setup, The wait's law) does not close it: with the think time uniform "
    "the same closed form is -4.3 % (test_ttft_p90_uniform_think), so the rest is the fixed think time's synchrony, "
    "which here lifts the simulated tail (460 ms against 399 with the uniform think time)"
)
PREFILL_TTFT_MISS = (
    "known miss since 2026-12-07: prefill-only P90 TTFT 460 ms against 370 simulated (+24.5 %, 1,500 requests; "
    "474 against 373 ms, +27.0 %, at 5,000 with the concave decode law; +6.7 % with the SNIC "
    "wait at its mean). The preset's fixed think time synchronises the sessions, whose SNIC waits fall below the "
    "M/G/1's (docs/prefix_cache.md §10, Can the closed form price the synchrony?); the closed form now adds the "
    "wait's law, exact for Poisson returns: with the think time uniform it is +3.2 % (test_ttft_p90_uniform_think)"
)


def _benchmark() -> ModuleType:
    """The benchmark script as a module (its scenario, simulation and saturation helpers)."""
    path = ROOT / "benchmarks" / "dualpath_closed_form_vs_sim.py"
    spec = importlib.util.spec_from_file_location("dualpath_closed_form_vs_sim", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def rows() -> dict[str, dict[str, tuple[float, float]]]:
    bench: Any = _benchmark()
    out: dict[str, dict[str, tuple[float, float]]] = {}
    for think in ("fixed", "uniform"):
        for name in ("prefill-only", "optimal"):
            case = bench.run_case(name, bench.SPLITS[name], REQUESTS, think=think)
            key = name if think == "fixed" else f"{name}, uniform think"
            out[key] = {quantity: (closed, sim) for quantity, closed, sim in case.rows}
    return out


def _error(pair: tuple[float, float]) -> float:
    closed, sim = pair
    return closed / sim - 1


@pytest.mark.xdist_group("dualpath_vs_sim")
@pytest.mark.parametrize("split", ["prefill-only", "optimal"])
def test_saturation_read_rate(rows: dict[str, dict[str, tuple[float, float]]], split: str) -> None:
    assert abs(_error(rows[split]["saturation read rate (req/s)"])) <= TOLERANCE


@pytest.mark.xdist_group("dualpath_vs_sim")
@pytest.mark.parametrize("split", ["prefill-only", "optimal"])
def test_busiest_snic_utilisation(rows: dict[str, dict[str, tuple[float, float]]], split: str) -> None:
    assert abs(_error(rows[split]["busiest SNIC utilisation"])) <= TOLERANCE


@pytest.mark.xdist_group("dualpath_vs_sim")
def test_decode_share_is_the_closed_form_split(rows: dict[str, dict[str, tuple[float, float]]]) -> None:
    closed, sim = rows["optimal"]["decode path's share of bytes read"]
    assert sim == pytest.approx(closed, abs=0.03)  # a seeded draw over about 1,400 reads: sd 0.013


@pytest.mark.xdist_group("dualpath_vs_sim")
@pytest.mark.xfail(strict=True, raises=AssertionError, reason=PREFILL_TTFT_MISS)
def test_prefill_only_ttft_p90(rows: dict[str, dict[str, tuple[float, float]]]) -> None:
    assert abs(_error(rows["prefill-only"]["TTFT P90 (ms)"])) <= TOLERANCE_TTFT_PREFILL


@pytest.mark.xdist_group("dualpath_vs_sim")
@pytest.mark.xfail(strict=True, raises=AssertionError, reason=DUAL_TTFT_MISS)
def test_dual_path_ttft_p90(rows: dict[str, dict[str, tuple[float, float]]]) -> None:
    assert abs(_error(rows["optimal"]["TTFT P90 (ms)"])) <= TOLERANCE


@pytest.mark.xdist_group("dualpath_vs_sim")
@pytest.mark.parametrize("split", ["prefill-only", "optimal"])
def test_ttft_p90_uniform_think(rows: dict[str, dict[str, tuple[float, float]]], split: str) -> None:
    """The benchmark's ``--think uniform`` (the think time uniform on 11.6 ± 2 s: the same mean and hit ratios, the
    sessions' synchrony undone, so the SNICs see Poisson-like reads, the closed form's one assumption about them):
    +3.2 % prefill-only and −4.3 % at the optimal split with the SNIC wait's law (−16.2 % and −7.3 % with its mean
    alone, 1,500 requests, 2026-12-07); with the concave decode law and 5,000 requests +8.4 % and −9.3 %
    (:data:`REQUESTS`)."""
    assert abs(_error(rows[f"{split}, uniform think"]["TTFT P90 (ms)"])) <= TOLERANCE
