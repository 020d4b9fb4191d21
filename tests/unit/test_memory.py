"""Instance memory and KV capacity, worked by hand (pdplan.perf.memory)."""

import pytest

from pdplan.io.catalog import open_catalog
from pdplan.io.serving_defaults import serving_defaults
from pdplan.perf.memory import instance_memory, kv_replication

GIB = 2**30


def test_defaults_have_sources() -> None:
    d = serving_defaults()
    assert d.gpu_memory_utilization == 0.9
    for key in ("gpu_memory_utilization", "max_num_batched_tokens", "max_num_seqs"):
        assert d.sources[key]


def test_llama70b_does_not_fit_one_h100_but_fits_two() -> None:
    model = open_catalog().model("llama-3.1-70b")
    mem = instance_memory(model, 80 * GIB, defaults=serving_defaults(), tp=[1, 2], max_num_batched_tokens=8192)
    # weights 70.55e9 x 2 B = 141.1 GB > 0.9 x 85.9 GB usable
    assert mem.fits.tolist() == [False, True]
    # TP2: usable 0.9·80 GiB = 77.31 GB; weights 70.55 GB; workspace 8192·(4·8192 + 2·28672/2)·2 B = 1.01 GB
    usable = 0.9 * 80 * GIB
    weights = model.total_params() * 2 / 2
    workspace = 8192 * (4 * 8192 + 2 * 28672 / 2) * 2
    free = usable - weights - workspace
    assert float(mem.kv_free_bytes[1]) == pytest.approx(free)
    # two GPUs, 327,680 B/token spread over them (8 KV heads over 2 ranks: no replication)
    assert float(mem.kv_capacity_tokens[1]) == pytest.approx(2 * free / 327_680)
    assert float(mem.max_sequences(4096)[1]) == pytest.approx((2 * free) // (4096 * 327_680))


def test_kv_replication_gqa_and_mla() -> None:
    cat = open_catalog()
    assert kv_replication(cat.model("llama-3.1-70b"), [8, 16]).tolist() == [1.0, 2.0]
    assert kv_replication(cat.model("deepseek-v3"), [8]).tolist() == [8.0]  # latent cache on every rank
