"""Invariants of the PrfaaS capacity model (pdplan.serving.prfaas.capacity) over random laws, curves and links."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pdplan.serving.prfaas.capacity import (
    CapacityInputs,
    DecodePool,
    PrefillPool,
    capacity_at,
    homogeneous,
    search_threshold,
)
from pdplan.serving.prfaas.lengths import QuantileLaw
from pdplan.serving.prfaas.profile import Curves
from pdplan.specs.length_laws import LognormalDist
from pdplan.types import FloatArray

P_TOL = 1e-4  # offload fraction: the threshold search stops within one token
REL = 2e-5
"""Λ_max compared across two searches: each stops within one token of its threshold (THRESHOLD_XATOL_TOKENS), and where
the optimum sits on a kink (the link saturating) Λ_max has a slope there, so a search can stop short of it by the
slope times that token. Hypothesis found 8.9e-6 relative per token (link 2.35 GB/s against 0.5625 of it: Λ_max
22.9439138 against 22.9438909 at thresholds 0.11 token apart); two tokens' worth."""


def _quadratic(a: float, b: float, c: float) -> object:
    return lambda x: a + b * x + c * np.asarray(x, float) ** 2


def _kv(per_token: float, state: float) -> object:
    return lambda x: state + per_token * np.asarray(x, float)


@st.composite
def inputs(draw: st.DrawFn) -> tuple[CapacityInputs, float]:
    law = QuantileLaw(
        LognormalDist(
            dist="lognormal",
            mu=draw(st.floats(7.0, 11.0)),
            sigma=draw(st.floats(0.3, 1.5)),
            min=128,
            max=131072,
        )
    )
    remote_speed = draw(st.floats(1.0, 6.0))  # remote GPUs this much faster than local
    a, b, c = draw(st.floats(0.05, 0.5)), draw(st.floats(1e-5, 1e-4)), draw(st.floats(0.0, 2e-10))
    per_token = draw(st.floats(1e3, 4e5))  # KV bytes per token: hybrid ~1e4, dense GQA ~2.5e5
    kv = _kv(per_token, draw(st.floats(0.0, 2e8)))
    local = Curves(prefill_s=_quadratic(a, b, c), kv_bytes=kv, source="law")  # type: ignore[arg-type]
    remote = Curves(
        prefill_s=_quadratic(a / remote_speed, b / remote_speed, c / remote_speed),  # type: ignore[arg-type]
        kv_bytes=kv,  # type: ignore[arg-type]
        source="law",
    )
    inp = CapacityInputs(
        law=law,
        mean_output_tokens=1024.0,
        remote=PrefillPool(remote, draw(st.integers(1, 8))),
        local=PrefillPool(local, draw(st.integers(1, 8))),
        decode=DecodePool(draw(st.floats(100.0, 5000.0)), draw(st.integers(1, 8)), source="law"),
        link_bytes_per_s=draw(st.floats(1e8, 5e10)),
    )
    return inp, per_token


@settings(max_examples=40, deadline=None)
@given(inputs(), st.floats(0.05, 0.95))
def test_slower_link_never_raises_offload_nor_capacity(case: tuple[CapacityInputs, float], slow: float) -> None:
    inp, _ = case
    fast = search_threshold(inp)
    slower = search_threshold(replace(inp, link_bytes_per_s=inp.link_bytes_per_s * slow))
    assert slower.offload_fraction <= fast.offload_fraction + P_TOL
    assert slower.lambda_max_rps <= fast.lambda_max_rps * (1 + REL)


@settings(max_examples=40, deadline=None)
@given(inputs())
def test_threshold_above_longest_prompt_is_exactly_homogeneous(case: tuple[CapacityInputs, float]) -> None:
    inp, _ = case
    above = capacity_at(inp, inp.law.upper + 1000.0)
    homo = homogeneous(inp)
    assert above.offload_fraction == 0.0
    assert above.lambda_max_rps == homo.lambda_max_rps


@settings(max_examples=40, deadline=None)
@given(inputs())
def test_searched_plan_never_worse_than_homogeneous(case: tuple[CapacityInputs, float]) -> None:
    inp, _ = case
    assert search_threshold(inp).lambda_max_rps >= homogeneous(inp).lambda_max_rps * (1 - REL)


@settings(max_examples=40, deadline=None)
@given(inputs(), st.floats(2.0, 40.0))
def test_hybrid_offloads_at_least_as_much_as_dense(case: tuple[CapacityInputs, float], reduction: float) -> None:
    """Same prefill times, KV per token divided by ``reduction`` (Table 3: 4-13x at 32K): never less offloaded."""
    dense, per_token = case

    def hybrid_kv(x: FloatArray) -> FloatArray:
        return np.asarray(dense.remote.curves.kv_bytes(x), float) - per_token * (1 - 1 / reduction) * x

    hybrid = replace(dense, remote=replace(dense.remote, curves=replace(dense.remote.curves, kv_bytes=hybrid_kv)))
    assert search_threshold(hybrid).offload_fraction >= search_threshold(dense).offload_fraction - P_TOL
