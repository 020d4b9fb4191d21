"""A sweep as a job: the grid file read and checked (:class:`pdplan.specs.sweep.SweepSpec`), its base scenario loaded
once, its points expanded, and what each worker needs to run any point (docs/sweep.md §2)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pdplan.errors import SpecError
from pdplan.io.files import read_yaml_mapping
from pdplan.io.scenario import default_scenario_path, load_scenario, scenario_from_dict
from pdplan.specs.base import validate_spec
from pdplan.specs.scenario import Scenario
from pdplan.specs.sweep import SloTier, SweepPoint, SweepSpec

Command = Literal["optimize", "evaluate"]
COMMANDS: tuple[Command, ...] = ("optimize", "evaluate")
FILE_SUFFIXES = (".yaml", ".yml", ".json")
"""A model, workload or engine value with one of these suffixes is a file, read relative to the grid file."""


@dataclass(frozen=True, slots=True)
class SweepJob:
    """Everything a worker needs to run any point of a sweep (picklable: it travels to process-pool and Ray
    workers once)."""

    source: str
    """The grid file, as named in error lines."""
    base: Scenario
    base_dir: Path
    """The grid file's folder: relative model, workload and engine files are read from there."""
    points: tuple[SweepPoint, ...]
    tiers: dict[str, SloTier]
    command: Command
    objective: str | None
    top: int
    hardware_db: tuple[Path, ...] = ()
    kernel_tables: tuple[Path, ...] = ()

    @property
    def sweep_id(self) -> str:
        """A stable hash of what every point shares (the base scenario, command, objective, plans per point and
        SLO tiers): rows of a JSONL written under another sweep id answer another question and are not reused."""
        shared = {
            "base": self.base.model_dump(mode="json"),
            "command": self.command,
            "objective": self.objective,
            "top": self.top,
            "tiers": {name: tier.model_dump(mode="json") for name, tier in sorted(self.tiers.items())},
        }
        canonical = json.dumps(shared, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:12]

    def local_path(self, value: str) -> str:
        """``value`` as the library should read it: a relative file name (:data:`FILE_SUFFIXES`) joined to the grid
        file's folder; a catalogue or preset name as it is."""
        path = Path(value)
        if path.suffix.lower() in FILE_SUFFIXES and not path.is_absolute():
            return str(self.base_dir / path)
        return value


def load_job(
    path: Path,
    command: str,
    *,
    hardware_db: tuple[Path, ...] = (),
    kernel_tables: tuple[Path, ...] = (),
) -> SweepJob:
    """Read the grid file at ``path`` into a job; bad input is one SpecError line naming the file and field."""
    if command not in COMMANDS:
        raise SpecError(f"{command!r} is not one of {', '.join(COMMANDS)}", field="--command")
    spec = validate_spec(SweepSpec, read_yaml_mapping(path), str(path))
    try:
        points = spec.expand()
    except ValueError as err:
        raise SpecError(str(err), source=str(path), field="list") from None
    _check_command(spec, points, command, str(path))
    return SweepJob(
        source=str(path),
        base=_base_scenario(spec, path),
        base_dir=path.resolve().parent,
        points=tuple(points),
        tiers=dict(spec.slo_tiers),
        command=command,  # checked against COMMANDS above
        objective=spec.objective,
        top=spec.top,
        hardware_db=hardware_db,
        kernel_tables=kernel_tables,
    )


def _base_scenario(spec: SweepSpec, path: Path) -> Scenario:
    """The base scenario: a file relative to the grid file, an inline mapping, or the bundled default."""
    if spec.base is None:
        return load_scenario(default_scenario_path())
    if isinstance(spec.base, str):
        return load_scenario(path.parent / spec.base)
    return scenario_from_dict(spec.base, source=f"{path}: base", base_dir=path.parent)


def _check_command(spec: SweepSpec, points: list[SweepPoint], command: str, source: str) -> None:
    """``evaluate`` prices one deployment: no GPU budget, and one GPU type per point."""
    if command != "evaluate":
        return
    where = "grid" if spec.grid is not None else "list"
    for point in points:
        if point.gpus is not None:
            raise SpecError("a GPU budget applies to --command optimize only", source=source, field=f"{where}.gpus")
        if point.gpu is not None and len(point.gpu) > 1:
            raise SpecError(
                f"--command evaluate prices one deployment: one GPU type per point, got {list(point.gpu)}",
                source=source,
                field=f"{where}.gpu",
            )
