"""``pdplan validate``: detect what kind of input a file is and schema-check it with the loader for that kind."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pdplan.errors import SpecError
from pdplan.specs.loading import read_yaml_mapping

Validator = Callable[[Path], object]


@dataclass(frozen=True)
class FileCheck:
    """Outcome for one file: its detected kind and the one-line error, if any."""

    file: str
    kind: str
    ok: bool
    error: str | None


@dataclass(frozen=True)
class ValidationResult:
    """Outcome for all files; ``ok`` only if every file passed."""

    files: tuple[FileCheck, ...]

    @property
    def ok(self) -> bool:
        return all(f.ok for f in self.files)


def _gpu(path: Path) -> object:
    from pdplan.specs.hardware import GpuSpec
    from pdplan.specs.loading import load_spec_file

    return load_spec_file(GpuSpec, path)


def _link(path: Path) -> object:
    from pdplan.specs.hardware import LinkSpec
    from pdplan.specs.loading import load_spec_file

    return load_spec_file(LinkSpec, path)


def _model(path: Path) -> object:
    from pdplan.specs.model import load_model_yaml

    return load_model_yaml(path)


def _hf(path: Path) -> object:
    from pdplan.hf_config import load_hf_config

    return load_hf_config(path)


def _workload(path: Path) -> object:
    from pdplan.workload import load_workload

    return load_workload(path)


def _kernel_table(path: Path) -> object:
    from pdplan.perf.kernels import load_kernel_table

    return load_kernel_table(path)


VALIDATORS: dict[str, Validator] = {
    "kernel-table": _kernel_table,
    "gpu": _gpu,
    "link": _link,
    "model": _model,
    "hf-config": _hf,
    "workload": _workload,
}

_KIND_KEYS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("kernel-table", ("gemm", "decode_attention")),
    ("gpu", ("scale_up_fabric", "bf16_flops_per_s")),
    ("link", ("line_rate_bytes_per_s",)),
    ("model", ("num_layers", "hidden_size")),
    ("workload", ("input_tokens", "output_tokens", "trace")),
)


def register_validator(kind: str, keys: tuple[str, ...], validator: Validator) -> None:
    """Let later modules (scenarios, kernel tables) add a kind recognised by its top-level keys."""
    VALIDATORS[kind] = validator
    global _KIND_KEYS
    _KIND_KEYS = ((kind, keys), *_KIND_KEYS)


def detect_kind(path: Path, data: dict[str, Any] | None) -> str:
    """The kind of an input file, from its suffix and top-level keys."""
    if path.suffix.lower() == ".json":
        return "hf-config"
    assert data is not None
    for kind, keys in _KIND_KEYS:
        if any(key in data for key in keys):
            return kind
    kinds = ", ".join(sorted(VALIDATORS))
    raise SpecError(f"cannot tell what kind of file this is (expected one of: {kinds})", source=str(path))


def check_file(path: Path) -> FileCheck:
    """Validate one file; never raises for bad input."""
    kind = "unknown"
    try:
        data = None if path.suffix.lower() == ".json" else read_yaml_mapping(path)
        kind = detect_kind(path, data)
        VALIDATORS[kind](path)
    except SpecError as err:
        return FileCheck(file=str(path), kind=kind, ok=False, error=str(err))
    return FileCheck(file=str(path), kind=kind, ok=True, error=None)


def validate_files(paths: Sequence[Path]) -> ValidationResult:
    """Validate every file; the result lists each with its kind and error."""
    return ValidationResult(files=tuple(check_file(Path(p)) for p in paths))
