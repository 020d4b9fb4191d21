"""A fuzz suite over the command line's flag space and the scenario schema (issue #26).

Hypothesis draws argument lists for ``evaluate``, ``simulate``, ``roofline``, ``transfer`` and ``optimize`` from
each flag's own values mixed with hostile ones (NaN, infinities, zero, negative and huge numbers, empty strings,
newlines, quotes, unknown names), and scenarios made by replacing one field of the default scenario with a hostile
value. Whatever it draws, a run must keep the contract of docs/errors.md:

* the exit code is 0, 2 (bad input) or 3 (no feasible plan), never 1 (a traceback) or anything else;
* a failure writes exactly one ``error:`` line to stderr (besides any ``progress:`` lines of a long run) and nothing
  to stdout (``validate`` prints its per-file report, then exits 2 when a file is bad);
* a success under ``--format json`` writes one JSON document to stdout;
* a run with ``-o`` leaves either the whole report (exit 0) or nothing (and no temporary file) in its folder;
* no run takes longer than :data:`BOUND_S`.

Runs are in-process (``pdplan.cli.app.run``), so the suite fits the CI budget; ``PDPLAN_FUZZ_EXAMPLES`` raises the
number of examples for a longer local campaign.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pdplan.cli.app import run

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = ROOT / "examples" / "default.yaml"
BOUND_S = 60.0
EXAMPLES = int(os.environ.get("PDPLAN_FUZZ_EXAMPLES", "25"))

HOSTILE_NUMBERS = ["nan", "inf", "-inf", "0", "-1", "1e30", "99999999999999999999", "1.5", "", " ", "x", "1e-300"]
HOSTILE_TEXT = ["", " ", "\n", "a\nb", "'", '"', "$(id)", "../../etc/passwd", "x" * 300, "é", "-", "--rate"]


def _mixed(valid: list[str], hostile: list[str]) -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(valid), st.sampled_from(hostile))


NUMBER_FLAGS: dict[str, list[str]] = {
    "--rate": ["0.5", "2", "8"],
    "--isl": ["128", "2048"],
    "--osl": ["1", "256"],
    "--tp": ["1", "2", "4", "8"],
    "--pp": ["1", "2"],
    "--dp": ["1", "2"],
    "--attainment": ["0.9", "0.99"],
    "--headroom": ["0", "0.2"],
    "--concurrency": ["1", "16"],
}
TEXT_FLAGS: dict[str, list[str]] = {
    "--gpu": ["h100-sxm", "h200-sxm", "l40s"],
    "--model": ["llama-3.1-8b", "llama-3.1-70b", "qwen3-30b-a3b"],
    "--xpyd": ["1P1D", "2P1D", "4P2D"],
    "--ttft-slo": ["2s", "400ms"],
    "--tpot-slo": ["100ms", "50ms"],
    "--engine": ["vllm", "sglang", "trtllm"],
    "--link": ["ib-ndr", "nvlink4"],
    "--workload": ["chat", "code"],
}
FORMATS = ["table", "json", "csv", "markdown"]


@st.composite
def evaluate_args(draw: st.DrawFn) -> list[str]:
    """``evaluate`` with the default scenario, two or three flags drawn, a format, sometimes ``-o``."""
    args = ["evaluate", str(DEFAULT)]
    numbers = draw(st.lists(st.sampled_from(sorted(NUMBER_FLAGS)), max_size=2, unique=True))
    texts = draw(st.lists(st.sampled_from(sorted(TEXT_FLAGS)), max_size=2, unique=True))
    for flag in numbers:
        args += [flag, draw(_mixed(NUMBER_FLAGS[flag], HOSTILE_NUMBERS))]
    for flag in texts:
        args += [flag, draw(_mixed(TEXT_FLAGS[flag], HOSTILE_TEXT))]
    return [*args, "--format", draw(st.sampled_from(FORMATS))]


@st.composite
def tool_args(draw: st.DrawFn) -> list[str]:
    """``roofline`` and ``transfer`` with drawn values (their flags are few and all numeric or names)."""
    number = _mixed(["1", "64", "2048"], HOSTILE_NUMBERS)
    if draw(st.booleans()):
        return [
            "roofline",
            "--model",
            draw(_mixed(TEXT_FLAGS["--model"], HOSTILE_TEXT)),
            "--gpu",
            draw(_mixed(TEXT_FLAGS["--gpu"], HOSTILE_TEXT)),
            "--phase",
            draw(st.sampled_from(["prefill", "decode", "x"])),
            "--batch",
            draw(number),
            "--tokens",
            draw(number),
            "--tp",
            draw(_mixed(NUMBER_FLAGS["--tp"], HOSTILE_NUMBERS)),
            "--format",
            draw(st.sampled_from(FORMATS)),
        ]
    return [
        "transfer",
        "--model",
        draw(_mixed(TEXT_FLAGS["--model"], HOSTILE_TEXT)),
        "--tokens",
        draw(number),
        "--link",
        draw(_mixed(TEXT_FLAGS["--link"], HOSTILE_TEXT)),
        "--granularity",
        draw(st.sampled_from(["request", "layer", "chunk", "bogus"])),
        "--format",
        draw(st.sampled_from(FORMATS)),
    ]


HOSTILE_VALUES: list[Any] = [None, -1, 0, 1e308, float("nan"), "", "x", [], {}, [1, 2], True, "1e30", 10**30]
"""Values a scenario field is replaced with (YAML writes NaN as ``.nan``)."""


def _leaves(data: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(data, dict):
        return [p for key, value in data.items() for p in _leaves(value, (*path, key))] or [path]
    if isinstance(data, list) and data:
        return [p for i, value in enumerate(data) for p in _leaves(value, (*path, i))]
    return [path]


def _replaced(data: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    copy = dict(data) if isinstance(data, dict) else list(data)
    copy[path[0]] = _replaced(copy[path[0]], path[1:], value)
    return copy


BASES = {
    name: yaml.safe_load((ROOT / "examples" / name).read_text())
    for name in ("default.yaml", "chat-sessions.yaml", "shared-system-prompt.yaml", "deepseek-v3-wide-ep.yaml")
}
"""Scenarios whose fields are fuzzed: the default, the two reuse examples with inline workloads, and an MoE one."""
FIELDS = [(name, path) for name, data in BASES.items() for path in _leaves(data)]


def _invoke(argv: list[str]) -> tuple[int, str, str, float]:
    out, err = io.StringIO(), io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(argv)
    return code, out.getvalue(), err.getvalue(), time.perf_counter() - started


def _check_contract(argv: list[str], folder: Path | None = None, report: Path | None = None) -> None:
    code, out, err, seconds = _invoke(argv)
    assert code in (0, 2, 3), (argv, code, err[-2000:])
    assert seconds < BOUND_S, (argv, seconds)
    assert "Traceback" not in err, (argv, err[-2000:])
    if code != 0:
        lines = [line for line in err.splitlines() if line.strip() and not line.startswith("progress: ")]
        assert len(lines) == 1, (argv, err)
        assert lines[0].startswith("error: "), (argv, err)
        assert out == "" or argv[0] == "validate", (argv, out[:500])  # validate's report is its output
    elif "json" in argv and report is None:
        json.loads(out)
    if folder is not None:
        left = sorted(p.name for p in folder.iterdir())
        assert not [name for name in left if name.endswith(".tmp")], (argv, left)
        assert left == ([report.name] if code == 0 and report is not None else []), (argv, code, left)


FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(evaluate_args(), st.booleans())
def test_evaluate_flags_keep_the_contract(argv: list[str], to_file: bool) -> None:
    if not to_file:
        _check_contract(argv)
        return
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.out"
        _check_contract([*argv, "-o", str(report)], Path(tmp), report)


@FUZZ
@given(tool_args())
def test_roofline_and_transfer_flags_keep_the_contract(argv: list[str]) -> None:
    _check_contract(argv)


@FUZZ
@given(st.sampled_from(FIELDS), st.sampled_from(HOSTILE_VALUES), st.sampled_from(["evaluate", "validate"]))
def test_scenario_fields_keep_the_contract(field: tuple[str, tuple[Any, ...]], value: Any, command: str) -> None:
    base, path = field
    with tempfile.TemporaryDirectory() as tmp:
        scenario = Path(tmp) / "scenario.yaml"
        scenario.write_text(yaml.safe_dump(_replaced(BASES[base], path, value)))
        _check_contract([command, str(scenario)])


@settings(max_examples=max(4, EXAMPLES // 5), deadline=None, derandomize=True)
@given(
    st.sampled_from(["--xpyd", "--gpu", "--tp", "--rate", "--gpus"]),
    st.sampled_from(["2P1D", "h100-sxm", "4", "nan", "-1", "0", "", "99999999999999999999"]),
)
def test_optimize_flags_keep_the_contract(flag: str, value: str) -> None:
    _check_contract(["optimize", str(DEFAULT), flag, value, "--format", "json", "--top", "1"])
