"""PPD's decode instances admit on the plain disaggregated decode server's footprint (issue #23 item 5,
pdplan.serving.ppd_decode.kv_admission): under SGLang each request counts its held context plus
``num_reserved_decode_tokens`` R, in the KV admission queue and in the stretched step's comfortable KV bound."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import load_scenario
from pdplan.queueing.kv_admission import decode_server_footprint, kv_held, kv_mean_rate
from pdplan.queueing.linear_capacity import fast_decode_capacity
from pdplan.serving.build import build_model, with_cache_rate
from pdplan.serving.limits import DECODE_U_MAX
from pdplan.serving.ppd_report import placement_of
from pdplan.serving.resolve import resolve
from pdplan.specs.cache import TurnPlacementSpec

EXAMPLE = Path(__file__).parents[2] / "examples" / "chat-ppd.yaml"
CATALOG = open_catalog()


def _ppd(engine: str) -> Any:
    """The chat-ppd example under ``engine``, every held Turn 2+ on decode, at 10 req/s."""
    sc = load_scenario(EXAMPLE)
    assert sc.cache is not None
    cache = sc.cache.model_copy(update={"turn_placement": TurnPlacementSpec(policy="ppd")})
    res = with_cache_rate(resolve(sc.model_copy(update={"cache": cache, "engine": engine}), CATALOG), 10.0)
    model = build_model(res)
    assert placement_of(model) is not None
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
