"""The optimiser's screen prices the KV data plane as the exact evaluation does (issue #24 item 5; docs/kv_data_plane.md
§7): for screened candidates of several backends, granularities and engines, the screen's exposed KV time per prompt
bin equals the exact model's, and the link rate the screen's fan-in bound reads is the transfer's (the backend's cap
where it has one)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import load_scenario
from pdplan.search.pool import build_pool
from pdplan.search.space import build_space
from pdplan.serving.build import build_model
from pdplan.serving.disaggregated import DisaggregatedModel
from pdplan.serving.resolve import bind, resolve

DEFAULT = Path(__file__).resolve().parents[2] / "examples" / "default.yaml"
CASES = {
    "vLLM NIXL, request-wise": {"kv_backend": "engine"},
    "vLLM NIXL block 64, request-wise": {"kv_backend": "engine", "kv_block_tokens": 64},
    "TCP (rate cap, staging), request-wise": {"kv_backend": "tcp"},
    "vLLM NIXL, layer-wise": {"kv_backend": "nixl-ucx", "granularity": "layer", "granularities": ["layer"]},
    "SGLang Mooncake, layer-wise": {"engine": "sglang", "granularity": "layer", "granularities": ["layer"]},
    "link alone": {"kv_backend": "none"},
    "searched blocks and backends": {"search": {"kv_block_tokens": [16, 64], "kv_backends": ["engine", "tcp"]}},
}


@pytest.mark.parametrize("case", list(CASES))
def test_screen_transfer_time_equals_the_exact_models(case: str) -> None:
    change = dict(CASES[case])
    granularities = change.pop("granularities", None)
    sc = load_scenario(DEFAULT)
    more = change.pop("search", {})
    search = sc.search.model_copy(update={"tp": [2, 4], "max_instances": 4, **more})  # type: ignore[union-attr,dict-item]
    if granularities is not None:
        search = search.model_copy(update={"granularities": granularities})
    sc = sc.model_copy(update={**change, "search": search})
    catalog = open_catalog()
    res = resolve(sc, catalog)
    pool = build_pool(res, build_space(sc, catalog), catalog, lambda _: None, best=4)
    checked, blocks = 0, set()
    for i in range(0, pool.screened.size, max(1, pool.screened.size // 40)):
        base = pool.bases[int(pool.screened.prefill[i])]
        table = pool.tables[int(pool.screened.decode[i])]
        assert table.hw.kv_block_tokens == base.hw.kv_block_tokens
        model = build_model(bind(res, pool.deployment(i)))
        assert isinstance(model, DisaggregatedModel)
        assert base.exposed_s == pytest.approx(np.asarray(model.exposed_s), rel=1e-12, abs=1e-15)
        assert model.decode.kv_capacity_tokens == table.perf.kv_capacity_tokens  # the same decode instance type
        assert model.decode.state_tokens_per_seq == pytest.approx(table.perf.state_tokens_per_seq, rel=1e-12)
        blocks.add(model.res.hardware.decode.kv_block_tokens)
        checked += 1
    assert checked >= 4
    if more:  # both block sizes reach the exact model, with their own fragmentation
        assert blocks == {16, 64}
    if sc.kv_backend == "tcp":  # 36 GB/s cap below IB NDR's 2 × 50 GB/s · efficiency
        assert base.link_bytes_per_s == pytest.approx(36e9, rel=1e-3)
