"""Reading what ``pdplan export`` needs besides the plan: its data files and the plan document itself.

* ``pdplan/data/export/targets.yaml``, ``node_labels.yaml``, ``engine_flags.yaml`` (packaged, sourced data);
* the plan: ``optimize --format json`` output from a file or from stdin (``-``), validated at this boundary.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from pdplan.errors import SpecError
from pdplan.io.files import DEEP_MESSAGE, load_spec_file, read_text_file
from pdplan.specs.base import validate_spec
from pdplan.specs.export import EngineFlags, ExportTargets, NodeLabels, PlanDocument

EXPORT_DATA_DIR = Path(str(resources.files("pdplan"))) / "data" / "export"
PLAN_HINT = "expected the JSON that `pdplan optimize --format json` writes"


@lru_cache(maxsize=1)
def export_targets() -> ExportTargets:
    """Images, versions, ports and engine behaviour (``targets.yaml``)."""
    return load_spec_file(ExportTargets, EXPORT_DATA_DIR / "targets.yaml")


@lru_cache(maxsize=1)
def node_labels() -> NodeLabels:
    """Node labels per GPU type (``node_labels.yaml``)."""
    return load_spec_file(NodeLabels, EXPORT_DATA_DIR / "node_labels.yaml")


@lru_cache(maxsize=1)
def engine_flags() -> EngineFlags:
    """Accepted flags per launched program (``engine_flags.yaml``)."""
    return load_spec_file(EngineFlags, EXPORT_DATA_DIR / "engine_flags.yaml")


def read_plan_document(path: str, stdin_text: str | None = None) -> PlanDocument:
    """The plan JSON at ``path``, or ``stdin_text`` when ``path`` is ``-``; SpecError (one line) if it is not one."""
    where = "<stdin>" if path == "-" else path
    text = stdin_text if path == "-" else read_text_file(Path(path))
    if text is None or not text.strip():
        raise SpecError(f"empty input; {PLAN_HINT}", source=where)
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError as err:
        raise SpecError(f"not JSON (line {err.lineno}: {err.msg}); {PLAN_HINT}", source=where) from None
    except RecursionError:
        raise SpecError(DEEP_MESSAGE, source=where) from None
    if not isinstance(data, dict) or "plans" not in data:
        raise SpecError(f"no 'plans' list; {PLAN_HINT}", source=where)
    return validate_spec(PlanDocument, data, where)
