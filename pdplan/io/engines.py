"""Engine profiles on disk: the packaged ones (``pdplan/data/engines/<name>.yaml``) and the user's own.

A name (``vllm``, case-insensitive) is looked up in ``--hardware-db`` folders' ``engines/`` and then the package
(:meth:`pdplan.io.catalog.Catalog.engine`); anything that looks like a path is read as a YAML file. ``ENGINE@VERSION``
(``vllm@0.12``, ``vllm@0.18``) picks the profile of that engine whose version is VERSION or starts with
``VERSION.`` (issue #23: the profiles name the version they describe; a plain name is the default version).
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path

from pdplan.errors import SpecError, UnknownNameError
from pdplan.io.files import load_spec_file
from pdplan.specs.engine import EngineProfile

ENGINE_DIR = Path(str(resources.files("pdplan"))) / "data" / "engines"
"""Folder of the packaged engine profiles (package data)."""

DEFAULT_ENGINE = "vllm"
"""The profile used when a scenario and the command line name none (docs/architecture.md §4: default ``vllm``)."""


def packaged_engine_names() -> list[str]:
    """Names of the engine profiles shipped inside the package."""
    return sorted(p.stem for p in ENGINE_DIR.glob("*.yaml"))


def load_engine_file(path: Path, *, by_name: bool = False) -> EngineProfile:
    """Read and validate one engine YAML; a catalogue entry's ``name`` must equal its file name."""
    profile = _load_cached(str(path.resolve()) if path.exists() else str(path))
    if by_name and profile.name.lower() != path.stem.lower():
        raise SpecError(
            f"name {profile.name.lower()!r} does not match the file name {path.stem!r}", source=str(path), field="name"
        )
    return profile


def load_engine(name_or_path: str | Path, user_files: dict[str, Path] | None = None) -> EngineProfile:
    """An engine profile by name (``user_files`` first, then the package) or by YAML path."""
    text = str(name_or_path)
    candidate = Path(text)
    if candidate.suffix.lower() in {".yaml", ".yml"} or "/" in text or candidate.exists():
        return load_engine_file(candidate)
    key = text.strip().lower()
    files = {p.stem.lower(): p for p in sorted(ENGINE_DIR.glob("*.yaml"))}
    files.update(user_files or {})
    if "@" in key:
        return _engine_at_version(key, files)
    found = files.get(key)
    if found is None:
        raise UnknownNameError("engine", text, files)
    return load_engine_file(found, by_name=True)


def version_has_prefix(version: str, prefix: str) -> bool:
    """Whether ``version`` is ``prefix`` or starts with it as whole components: ``0.5.1.post1`` has ``0.5.1`` and
    ``0.5``, ``0.5.60`` has not ``0.5.6``."""
    return version == prefix or version.startswith(prefix + ".")


def _engine_at_version(key: str, files: dict[str, Path]) -> EngineProfile:
    """The one profile of ``ENGINE@VERSION`` (module docstring); SpecError listing the versions there are."""
    engine, _, version = key.partition("@")
    profiles = [load_engine_file(path, by_name=True) for path in files.values()]
    same = [p for p in profiles if p.engine == engine.strip()]
    want = version.strip()
    found = [p for p in same if version_has_prefix(p.version, want)]
    if len(found) == 1:
        return found[0]
    versions = ", ".join(sorted(f"{p.engine}@{p.version}" for p in same)) or "none"
    what = "several profiles match" if found else "no profile matches"
    raise SpecError(f"{what} {key!r}; versions there are: {versions}", field="engine")


@lru_cache(maxsize=64)
def _load_cached(path: str) -> EngineProfile:
    return load_spec_file(EngineProfile, Path(path))
