"""Every ``pdplan export --to dynamo`` manifest validates against the DynamoGraphDeployment CRD's OpenAPI schema
(issue #25 item 2), with ``jsonschema`` (a test dependency) and Kubernetes' strict field validation: an object
schema that lists ``properties`` accepts no other key unless it says ``additionalProperties`` or
``x-kubernetes-preserve-unknown-fields`` (``kubectl apply --validate=strict``, the default since Kubernetes 1.27).

The schema: ``tests/data/export/dynamo_crd/`` (an excerpt of ai-dynamo/dynamo's CRD, Apache-2.0; its README says
which commit and why not the v1.2.1 tag; the validator: ``tests/support/dynamo_crd.py``). Plans:
``tests/support/export_plans.py``, on Dynamo's vLLM, SGLang and TensorRT-LLM workers.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from support.dynamo_crd import CRD, crd, problems
from support.export_plans import GOLDEN, export, outcomes
from support.optimized import Optimized

from pdplan.io.export_data import export_targets, read_plan_document


@pytest.mark.slow
@pytest.mark.xdist_group("optimized")
def test_every_dynamo_manifest_validates_against_the_crd(optimized: Optimized) -> None:
    checked = 0
    for out in outcomes(optimized, [("dynamo", "vllm"), ("dynamo", "sglang"), ("dynamo", "trtllm")]):
        if out.result is None:
            continue
        manifest = yaml.safe_load(out.result.text)
        assert problems(manifest) == [], (out.name, out.rank, out.backend)
        checked += 1
    assert checked >= 20


def test_the_crd_copy_is_the_dgd_export_targets() -> None:
    spec = crd()["spec"]
    targets = export_targets().dynamo
    assert f"{spec['group']}/{spec['versions'][0]['name']}" == targets.api_version
    assert spec["names"]["kind"] == targets.kind
    assert "Apache-2.0" in CRD.read_text().split("---")[0]


def _manifest() -> dict[str, Any]:
    doc = read_plan_document(str(GOLDEN / "default.json"))
    manifest: dict[str, Any] = yaml.safe_load(export(doc, 1, "dynamo", "vllm").text)
    assert problems(manifest) == []
    return manifest


def _worker(manifest: dict[str, Any]) -> dict[str, Any]:
    worker: dict[str, Any] = manifest["spec"]["services"]["VllmPrefillWorker"]
    return worker


BREAKAGES = [
    ("a misspelt service key", lambda m: _worker(m).update(subComponentTyp="prefill"), "subComponentTyp"),
    ("replicas as a string", lambda m: _worker(m).update(replicas="3"), "'3' is not of type 'integer'"),
    ("a GPU count as a number", lambda m: _worker(m)["resources"]["limits"].update(gpu=2), "2 is not of type"),
    ("one-node multinode", lambda m: _worker(m).update(multinode={"nodeCount": 1}), "less than the minimum"),
    ("args not strings", lambda m: _worker(m)["extraPodSpec"]["mainContainer"].update(args=[1]), "not of type"),
    ("an unknown pod field", lambda m: _worker(m)["extraPodSpec"].update(nodeSelectr={}), "nodeSelectr"),
    ("another kind", lambda m: m.update(kind="DynamoGraph"), "kind 'DynamoGraph'"),
]


@pytest.mark.parametrize(("what", "break_it", "message"), BREAKAGES, ids=[b[0] for b in BREAKAGES])
def test_a_manifest_the_crd_rejects_fails(what: str, break_it: Any, message: str) -> None:
    manifest = copy.deepcopy(_manifest())
    break_it(manifest)
    found = problems(manifest)
    assert any(message in p for p in found), (what, found)
