"""A remote pool's read utilisation is the deployment's reads over the pool's bandwidth, counted once (a bug found
2026-12-06: the last tier's traffic was multiplied by the prefill instances a second time, so pools bound too early).

Hand-worked on examples/agent-dualpath.yaml with prefill-only reads: two TP8 prefill instances, one per 8-GPU node,
read from ``remote-3fs-100g`` (12.5 GB/s per node, its storage NIC, hardware_db/storage/remote-3fs-100g.yaml), each
seeing its node's whole 12.5 GB/s (:func:`pdplan.serving.prefix_cache.lower_tiers`: per node, the catalogue's
convention; before 2026-12-07 the pool was divided among the deployment's readers, 12.5/2 GB/s each); an instance
reading R bytes/s loads it to R / 12.5e9, the same as the deployment's 2R over the two nodes' 25e9."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pdplan import evaluate, load_scenario

ROOT = Path(__file__).resolve().parents[2]


def test_pool_utilisation_counts_each_reader_once(tmp_path: Path) -> None:
    data = yaml.safe_load((ROOT / "examples" / "agent-dualpath.yaml").read_text())
    data["cache"]["read_paths"] = "prefill"
    path = tmp_path / "prefill-only.yaml"
    path.write_text(yaml.safe_dump(data))
    ev = evaluate(load_scenario(path))
    assert ev.cache is not None
    pool = next(t for t in ev.cache.tiers if t.name == "remote-3fs-100g")
    util = pool.path_utilisation["remote-3fs-100g read"]
    assert util == pytest.approx(pool.read_bytes_per_s / 12.5e9, rel=1e-9)
    assert util <= 1.0 + 1e-9  # at the goodput a binding element is at most full, never past it
