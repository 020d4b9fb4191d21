"""Make the vendored calibration slice ``tests/data/calibration/`` from the full calibration data.

Usage: ``python tools/make_calibration_slice.py [SOURCE] [--out DIR]`` (SOURCE defaults to ``../shared/calibration``,
the folder described by its own ``README.md``; DIR to ``tests/data/calibration``). Standard library only.

The accuracy tests read measured data that a clone does not otherwise have. This script copies what they need, by
the rules in :data:`RULES`, mirroring the data set's folder names:

* ``whole``: every row (the end-to-end sample and the small wide-EP MoE tables);
* ``strided``: the rows matching ``where``, grouped by ``cell`` (the columns that make one accuracy cell, e.g. the
  GEMM dtype), and of each group every k-th row in file order from the first, k = ceil(rows / max_rows), so each
  cell keeps at most ``max_rows`` rows spread over the whole file (the every-k-th rule of
  ``pdplan.calibrate.fit.subsample_index``). A stride within a cell rather than over the file: a stride over the file
  can alias with the file's grid order (the GEMM tables alternate dtypes row by row).

Kept lines are copied byte for byte (header first), so a kept row reads exactly as in the source. Each data set's
``LICENSE`` is copied verbatim. The script also writes ``MANIFEST.csv`` (per file: rows in the source, rows kept,
the rule, the source file's SHA-256; ``benchmarks/data_root.py`` reads it to know which files are whole) and
``README.md``. Running it twice on the same source gives the same bytes.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = REPO.parent / "shared" / "calibration"
DEFAULT_OUT = REPO / "tests" / "data" / "calibration"
MAX_ROWS_PER_CELL = 1000
"""Rows kept per accuracy cell of a strided kernel table. Chosen so that every cell of the kernel accuracy gate keeps
its verdict and moves by at most 0.6 points (median) and 1.3 points (P90 |error|) against all rows (checked when the
slice was made; README.md), with the kernel tables of five GPUs at ~2.2 MB."""

MOE_MAX_ROWS = 2000
"""Rows kept of the B200 FP8 MoE cell, whose P90 sits 1.9 points under its target: at 1000 rows its P90 read 24.6 %
against 23.1 % on all rows, at 2000 rows 23.1 % (median 8.6 % both)."""

DATA_SETS = {
    "aiconfigurator-kernels": "NVIDIA AIConfigurator 0.12.0 kernel tables (vLLM 0.24.0 backend; A100: vLLM 0.14.0)",
    "aiconfigurator-moe": "NVIDIA AIConfigurator 0.12.0 MoE kernel data (vLLM 0.24.0 fused MoE; SGLang 0.5.10 wide EP)",
    "aiconfigurator-silicon": "NVIDIA AIConfigurator 0.12.0 end-to-end sample (measured serving runs)",
}
"""Data sets the slice takes files from (folder name: what and which release), all Apache-2.0."""

KERNEL_GPUS = ("a100_sxm", "h100_sxm", "h200_sxm", "l40s", "b200_sxm")
ATTENTION_CELL = ("attn_dtype", "kv_cache_dtype")
GATE = "tests/reference/test_kernel_anchors.py"


@dataclass(frozen=True)
class Rule:
    """Which rows of one source file the slice keeps, and which test reads them."""

    path: str
    read_by: str
    whole: bool = False
    cell: tuple[str, ...] = ()
    where: tuple[tuple[str, str], ...] = ()
    max_rows: int = MAX_ROWS_PER_CELL

    def describe(self) -> str:
        if self.whole:
            return "every row"
        if self.cell:
            return f"every k-th row per {' x '.join(self.cell)} (<= {self.max_rows} each)"
        where = ", ".join(f"{c} = {v}" for c, v in self.where)
        return f"the rows with {where}: every k-th of them (<= {self.max_rows})"


RULES: tuple[Rule, ...] = (
    Rule(
        "aiconfigurator-silicon/h100_sxm.csv",
        "tests/reference/test_engine_accuracy.py, tests/unit/test_phase_times_tp_terms.py; the end-to-end benchmarks",
        whole=True,
    ),
    *(
        Rule(f"aiconfigurator-kernels/{gpu}/{name}", GATE, cell=cell)
        for gpu in KERNEL_GPUS
        for name, cell in (
            ("gemm.csv", ("gemm_dtype",)),
            ("context_attention.csv", ATTENTION_CELL),
            ("generation_attention.csv", ATTENTION_CELL),
        )
    ),
    Rule(
        "aiconfigurator-moe/b200_sxm/moe_vllm.csv",
        "tests/unit/test_fit_moe_rerouted.py",
        where=(
            ("moe_dtype", "fp8_block"),
            ("kernel_source", "vllm_fp8moe_flashinfer_trtllm_trtllmfp8expertsmonolithic"),
        ),
        max_rows=MOE_MAX_ROWS,
    ),
    *(
        Rule(f"aiconfigurator-moe/{gpu}/wideep_{phase}_moe_sglang.csv", "tests/unit/test_moe_wideep.py", whole=True)
        for gpu in ("h100_sxm", "b200_sxm")
        for phase in ("context", "generation")
    ),
)


@dataclass(frozen=True)
class Sliced:
    """One sliced file: its rule, rows in the source and kept, the source's SHA-256."""

    rule: Rule
    source_rows: int
    kept_rows: int
    source_sha256: str


def _fields(line: bytes) -> list[str]:
    """The fields of one CSV line (no field of these files spans lines)."""
    return next(csv.reader([line.decode()]))


def kept_lines(rule: Rule, lines: Sequence[bytes]) -> list[bytes]:
    """The data lines (header excluded) the rule keeps, in file order."""
    header, data = lines[0], lines[1:]
    if rule.whole:
        return list(data)
    names = _fields(header)
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, line in enumerate(data):
        row = dict(zip(names, _fields(line), strict=True))
        if all(row[c] == v for c, v in rule.where):
            groups.setdefault(tuple(row[c] for c in rule.cell), []).append(i)
    keep: set[int] = set()
    for idx in groups.values():
        step = -(-len(idx) // rule.max_rows)
        keep.update(idx[::step])
    return [data[i] for i in sorted(keep)]


def slice_file(rule: Rule, source: Path, out: Path) -> Sliced:
    """Write the kept lines of one file under ``out`` and say what was kept."""
    raw = (source / rule.path).read_bytes()
    lines = raw.splitlines(keepends=True)
    kept = kept_lines(rule, lines)
    target = out / rule.path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(lines[0] + b"".join(kept))
    return Sliced(rule, len(lines) - 1, len(kept), hashlib.sha256(raw).hexdigest())


def manifest(sliced: Sequence[Sliced]) -> str:
    """``MANIFEST.csv``: one line per sliced file."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["path", "source_rows", "kept_rows", "rule", "source_sha256"])
    for s in sliced:
        writer.writerow([s.rule.path, s.source_rows, s.kept_rows, s.rule.describe(), s.source_sha256])
    return buf.getvalue()


def readme(sliced: Sequence[Sliced], out: Path) -> str:
    """``README.md``: where each file comes from, what was kept and why."""
    total = sum(p.stat().st_size for p in out.rglob("*") if p.is_file() and p.name != "README.md")
    lines = [
        "# Vendored calibration slice",
        "",
        "Generated by `python tools/make_calibration_slice.py` (its docstring gives the rules; do not edit by hand).",
        "A slice of the measured data pdplan's kernel tables and engine profiles are fitted and checked on, so",
        "that the accuracy tests run in every clone. Folder names mirror the full data sets (the developers'",
        "calibration folder, whose `README.md` describes every column); each set's licence is its `LICENSE`, copied",
        "verbatim.",
        "`MANIFEST.csv` gives, per file, the rows in the source and kept, the rule and the source file's SHA-256.",
        "",
        "| data set | what, release | licence |",
        "|---|---|---|",
        *(f"| `{name}/` | {what} | Apache-2.0 (`{name}/LICENSE`) |" for name, what in DATA_SETS.items()),
        "",
        "Strided files keep, of the rows matching the rule, every k-th row per accuracy cell in file order from the "
        "first, k = ceil(rows / the cap): the rows the tests score are spread over each file's whole grid, not a "
        "corner of it. Scores on a strided file differ from those on all rows: when the slice was made, the kernel "
        "gate's cells by at most 0.6 points of median and 1.3 points of P90 |error|, every verdict the same; the "
        "B200 FP8 MoE cell 8.6 / 23.1 % on both. The figures in `docs/` are computed on all rows.",
        "",
        "| file (original path in the data set) | rows kept / source | rule | read by |",
        "|---|---|---|---|",
        *(
            f"| `{s.rule.path}` | {s.kept_rows} / {s.source_rows} | {s.rule.describe()} | {s.rule.read_by} |"
            for s in sliced
        ),
        "",
        f"Total, this README aside: {total} bytes.",
        "",
    ]
    return "\n".join(lines)


def make_slice(source: Path, out: Path) -> list[Sliced]:
    """Write the whole slice (files, licences, MANIFEST.csv, README.md) from ``source`` into ``out``."""
    if out.exists():
        shutil.rmtree(out)
    sliced = [slice_file(rule, source, out) for rule in RULES]
    for name in DATA_SETS:
        shutil.copyfile(source / name / "LICENSE", out / name / "LICENSE")
    (out / "MANIFEST.csv").write_text(manifest(sliced), encoding="utf-8", newline="\n")
    (out / "README.md").write_text(readme(sliced, out), encoding="utf-8", newline="\n")
    return sliced


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("source", nargs="?", type=Path, default=DEFAULT_SOURCE, help="full calibration data folder")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="slice folder (replaced)")
    args = ap.parse_args()
    for s in make_slice(args.source, args.out):
        print(f"{s.rule.path}: {s.kept_rows} of {s.source_rows} rows")


if __name__ == "__main__":
    main()
