"""Each calibration row of the cross-GPU benchmark is priced with its own engine version's profile (issue #23 item 3):
``benchmarks/cross_gpu_rows.py`` ``profile_of``, and every profile it names is a packaged one of that engine."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest

from pdplan.io.engines import load_engine

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def rows_module(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))
    monkeypatch.delitem(sys.modules, "cross_gpu_rows", raising=False)
    import cross_gpu_rows

    return cross_gpu_rows


@pytest.mark.parametrize(
    ("engine", "version", "profile"),
    [
        ("sglang", "0.5.1.post1", "sglang"),
        ("sglang", "0.5.6.post2", "sglang-0.5.9"),
        ("sglang", "0.5.8", "sglang-0.5.9"),
        ("sglang", "0.5.8.post1", "sglang-0.5.9"),
        ("sglang", "0.5.9", "sglang-0.5.9"),
        ("sglang", "0.5.60", "sglang"),  # a prefix is a whole version component, not a string prefix
        ("vllm", "0.12.0", "vllm"),
        ("vllm", "0.18.0", "vllm-0.18"),
        ("trtllm", "1.0.0rc3", "trtllm"),
    ],
)
def test_row_priced_with_its_versions_profile(rows_module: ModuleType, engine: str, version: str, profile: str) -> None:
    assert rows_module.profile_of({"engine": engine, "version": version}) == profile


def test_every_routed_profile_is_that_engines(rows_module: ModuleType) -> None:
    for (engine, prefix), name in rows_module.VERSION_PROFILES.items():
        loaded = load_engine(name)
        assert loaded.engine == engine
        assert loaded.version.startswith(prefix) or name == "sglang-0.5.9"  # 0.5.6-0.5.8 share 0.5.9's rule
