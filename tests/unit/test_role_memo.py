"""pdplan.serving.role_memo: an instance type's prefill passes and decode fits are kept by value. Two
bindings of one deployment (new RoleHardware objects, equal by value) read the first one's result, the same doubles
a fresh roofline call gives; an instance type that differs in one field is priced afresh; the kept results cannot be
changed in place; clear_all forgets them."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from support.role_pass import prefill_pass

from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import default_scenario_path, load_scenario
from pdplan.queueing.exact_memo import clear_all
from pdplan.serving.resolve import ResolvedScenario, bind, resolve
from pdplan.serving.role_hardware import RoleHardware
from pdplan.serving.role_memo import arguments_key
from pdplan.serving.roles import decode_perf, prefill_pass_time, prefill_perf


def _bound() -> tuple[ResolvedScenario[object], RoleHardware, RoleHardware]:
    res = resolve(load_scenario(default_scenario_path()), open_catalog())
    d = res.hardware.deployment
    first, second = bind(res, d).hardware.prefill, bind(res, d).hardware.prefill
    return res, first, second


def test_equal_instance_types_share_one_price_bit_for_bit() -> None:
    clear_all()
    res, first, second = _bound()
    assert first is not second
    assert first.table is not second.table
    assert first == second
    tokens = np.asarray(res.lengths.input_tokens, dtype=np.float64)
    a = prefill_pass_time(first, batch=1.0, tokens=tokens, detail=False)
    b = prefill_pass_time(second, batch=1.0, tokens=tokens.copy(), detail=False)
    assert b is a
    fresh = prefill_pass(second, 1.0, float(tokens[-1]))  # the roofline itself, no memo
    assert float(a.time_s[-1]) == float(fresh.time_s[0])
    assert decode_perf(second, 700.0, 256.0, 7.5) is decode_perf(first, 700.0, 256.0, 7.5)
    assert decode_perf(first, 700.0, 256, 7.5) is decode_perf(first, 700.0, 256.0, 7.5)  # an int cap: one fit
    perf = prefill_perf(first, tokens)
    assert np.array_equal(perf.latency_s, prefill_perf(second, tokens).latency_s)


def test_another_instance_type_or_shape_is_priced_afresh() -> None:
    clear_all()
    _, first, _ = _bound()
    tokens = np.array([512.0, 2048.0])
    a = prefill_pass_time(first, batch=1.0, tokens=tokens, detail=False)
    wider = dataclasses.replace(first, tp=first.tp * 2)
    assert prefill_pass_time(wider, batch=1.0, tokens=tokens, detail=False) is not a
    assert prefill_pass_time(first, batch=np.array([1.0, 1.0]), tokens=tokens, detail=False) is not a
    assert prefill_pass_time(first, batch=1.0, tokens=tokens, detail=True) is not a
    assert arguments_key(1.0, tokens) != arguments_key(np.array([1.0]), tokens)  # shapes tell them apart
    assert arguments_key(tokens) != arguments_key(tokens.astype(np.int64))  # and dtypes


def test_kept_results_are_read_only_and_cleared() -> None:
    clear_all()
    _, first, _ = _bound()
    tokens = np.array([512.0, 2048.0])
    a = prefill_pass_time(first, batch=1.0, tokens=tokens, detail=True)
    with pytest.raises(ValueError, match="read-only"):
        a.time_s[0] = 0.0
    with pytest.raises(ValueError, match="read-only"):
        a.ops[0].time_s[...] = 0.0
    clear_all()
    assert prefill_pass_time(first, batch=1.0, tokens=tokens, detail=True) is not a
