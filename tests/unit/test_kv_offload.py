"""Engine KV-offload mechanisms as data (pdplan/data/kv_offload.yaml, pdplan/specs/kv_offload.py): every fact is
sourced to a repository, file and commit or says "not found"."""

from __future__ import annotations

from pathlib import Path

import pytest

from pdplan.errors import SpecError
from pdplan.io.kv_offload import load_kv_offload
from pdplan.specs.kv_offload import NOT_FOUND

FACTS = ("tiers", "block_tokens", "inclusion", "layerwise_overlap", "eviction")


def test_every_engine_of_the_survey_is_there() -> None:
    catalog = load_kv_offload()
    assert {m.engine for m in catalog.mechanisms} == {"vllm", "sglang", "trtllm", "dynamo", "mooncake"}
    names = [m.name for m in catalog.mechanisms]
    assert len(names) == len(set(names))
    for name in ("vllm-offloading-connector", "vllm-lmcache-connector", "vllm-mooncake-connector", "sglang-hicache"):
        assert catalog.get(name).name == name
    with pytest.raises(KeyError):
        catalog.get("no-such-mechanism")


def test_every_fact_has_a_commit_or_says_not_found() -> None:
    for mechanism in load_kv_offload().mechanisms:
        for fact_name in FACTS:
            fact = getattr(mechanism, fact_name)
            if fact.value is None:
                assert fact.source == NOT_FOUND
            else:
                repository = fact.source.split()[0]
                assert "/" in repository, (mechanism.name, fact_name)
                assert "@" in fact.source, (mechanism.name, fact_name)


def test_what_the_tier_model_reads() -> None:
    catalog = load_kv_offload()
    assert catalog.get("sglang-hicache").layerwise_overlap.value is True
    assert catalog.get("vllm-offloading-connector").inclusion.value == "inclusive"
    assert catalog.get("trtllm-kv-reuse-host-offload").inclusion.value == "exclusive"
    assert catalog.get("mooncake-store").inclusion.value == "exclusive"


@pytest.mark.parametrize(
    ("fact", "message"),
    [
        ("{value: inclusive, source: 'some page'}", "repository path @ commit"),
        ("{value: null, source: 'a/b c.py @ 123'}", "not found"),
    ],
)
def test_an_unsourced_fact_is_rejected(tmp_path: Path, fact: str, message: str) -> None:
    nf = "{value: null, source: not found}"
    text = f"""schema_version: 1
mechanisms:
  - name: bad
    engine: vllm
    display_name: Bad
    tiers: {nf}
    block_tokens: {nf}
    inclusion: {fact}
    layerwise_overlap: {nf}
    eviction: {nf}
"""
    path = tmp_path / "kv_offload.yaml"
    path.write_text(text)
    with pytest.raises(SpecError, match=message):
        load_kv_offload(path)
