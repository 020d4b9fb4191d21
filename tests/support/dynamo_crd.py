"""The DynamoGraphDeployment CRD's OpenAPI schema (``tests/data/export/dynamo_crd/``, an excerpt of
ai-dynamo/dynamo's CRD, Apache-2.0) as a validator with Kubernetes' strict field validation: an object schema that
lists ``properties`` accepts no other key unless it says ``additionalProperties`` or
``x-kubernetes-preserve-unknown-fields`` (``kubectl apply --validate=strict``, the default since Kubernetes 1.27).
Used by ``tests/unit/test_export_crd.py`` and the Dynamo export tests."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

CRD = (
    Path(__file__).resolve().parents[1]
    / "data"
    / "export"
    / "dynamo_crd"
    / "nvidia.com_dynamographdeployments.excerpt.yaml"
)


def strict(schema: Any) -> Any:
    """``schema`` with every object that lists ``properties`` closed to other keys (strict field validation)."""
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict(v) for k, v in schema.items()}
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


@cache
def crd() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(CRD.read_text())
    return data


def validator() -> jsonschema.protocols.Validator:
    version = crd()["spec"]["versions"][0]
    schema = strict(version["schema"]["openAPIV3Schema"])
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
    return cls(schema)


def problems(manifest: dict[str, Any]) -> list[str]:
    """Schema violations, plus the apiVersion and kind the CRD serves (``group/version``, ``names.kind``)."""
    spec = crd()["spec"]
    out = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator().iter_errors(manifest)]
    if manifest.get("apiVersion") != f"{spec['group']}/{spec['versions'][0]['name']}":
        out.append(f"apiVersion {manifest.get('apiVersion')!r} is not served by the CRD")
    if manifest.get("kind") != spec["names"]["kind"]:
        out.append(f"kind {manifest.get('kind')!r} is not the CRD's")
    return out
