"""Bad KV-reuse inputs through the command line: exit 2 and one ``error:`` line naming the file and the line or field,
no traceback (docs/reuse_workloads.md §3, docs/prefix_cache.md).

Each bad file is written here from a good one with one fault: Mooncake trace lines (a missing or negative field,
unsorted timestamps, an empty ``hash_ids``, block ids that do not match the block size), storage tiers (the corpus in
``tests/bad_inputs/storage``, and a scenario naming one by path), a scenario's ``cache.tiers[].capacity: 0``, session
turn counts below 1, Zipf exponents out of [0, 10], and an inference-perf config whose data type pdplan does not read.
Workload files go through ``pdplan validate FILE`` and ``pdplan evaluate --workload FILE ...``; scenarios through
``pdplan validate`` (where the fault is in the file itself) and ``pdplan evaluate SCENARIO``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.cli_result import CliResult

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "tests" / "data" / "mooncake" / "conversation_trace_head200.jsonl"
STORAGE = ROOT / "tests" / "bad_inputs" / "storage"
CHAT = ROOT / "examples" / "chat-sessions.yaml"
EVALUATE = ("evaluate", "--rate", "1", "--engine", "vllm", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tp", "1")
EVALUATE_XPYD = (*EVALUATE, "--xpyd", "1P1D")


def one_error_line(result: CliResult, *needles: str) -> str:
    """Exit 2, exactly one non-empty stderr line starting ``error:``, every needle in it, no traceback."""
    assert result.code == 2, (result.code, result.err)
    assert "Traceback" not in result.err
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert len(lines) == 1, result.err
    assert lines[0].startswith("error: "), lines[0]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def _rows() -> list[dict[str, Any]]:
    """The first five requests of the vendored conversation trace (all at timestamp 0, 512-token blocks)."""
    with SAMPLE.open() as fh:
        return [json.loads(next(fh)) for _ in range(5)]


def _spread(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows one second apart (replaying a trace's times needs them spread: arrival: trace measures the gaps)."""
    for i, row in enumerate(rows):
        row["timestamp"] = 1000 * i
    return rows


def _jsonl(tmp_path: Path, rows: list[dict[str, Any]], name: str) -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _missing_field(rows: list[dict[str, Any]]) -> None:
    del rows[2]["output_length"]


def _negative_length(rows: list[dict[str, Any]]) -> None:
    rows[2]["input_length"] = -5


def _negative_timestamp(rows: list[dict[str, Any]]) -> None:
    rows[3]["timestamp"] = -1


def _unsorted(rows: list[dict[str, Any]]) -> None:
    rows[2]["timestamp"] = 100  # line 4 (timestamp 0) then arrives before line 3


def _empty_ids(rows: list[dict[str, Any]]) -> None:
    rows[2]["hash_ids"] = []


def _one_id_short(rows: list[dict[str, Any]]) -> None:
    rows[2]["hash_ids"] = rows[2]["hash_ids"][:-1]  # 14 ids for 7,236 tokens: ceil(7236 / 512) = 15


TRACE_FAULTS: dict[str, tuple[Callable[[list[dict[str, Any]]], None], tuple[str, ...]]] = {
    "missing-field": (_missing_field, ("line 3, field output_length", "missing field")),
    "negative-length": (_negative_length, ("line 3, field input_length", "-5 must be an integer >= 1")),
    "negative-timestamp": (_negative_timestamp, ("line 4, field timestamp", "-1 must be a finite time in ms >= 0")),
    "unsorted-timestamps": (_unsorted, ("line 4, field timestamp", "previous line's 100 ms", "non-decreasing")),
    "empty-hash-ids": (_empty_ids, ("line 3, field hash_ids", "non-empty list")),
    "block-count": (_one_id_short, ("line 3, field hash_ids", "expected ceil(7236 / 512) = 15")),
}
"""fault -> (how line 3 or 4 of a good trace is broken, what the one error line must say)."""


@pytest.mark.parametrize("command", ["validate", "evaluate"])
@pytest.mark.parametrize("fault", sorted(TRACE_FAULTS))
def test_bad_trace_line_is_named(cli: Callable[..., CliResult], tmp_path: Path, fault: str, command: str) -> None:
    breaks, needles = TRACE_FAULTS[fault]
    rows = _rows()
    breaks(rows)
    path = _jsonl(tmp_path, rows, f"{fault}.jsonl")
    argv = ("validate", path) if command == "validate" else (*EVALUATE_XPYD, "--workload", path)
    line = one_error_line(cli(*argv), f"{fault}.jsonl: line", *needles)
    assert line.count(f"{fault}.jsonl") == 1  # the file is named once, not once per layer


@pytest.mark.parametrize("command", ["validate", "evaluate"])
def test_a_trace_whose_times_cannot_be_replayed(cli: Callable[..., CliResult], tmp_path: Path, command: str) -> None:
    """A ``.jsonl`` is replayed at its own times (``arrival: trace``): five requests all at 0 ms give no rate and no
    gaps to measure c_a² from; the error names the file and ``arrival`` (it once surfaced from the queueing model
    without the file)."""
    path = _jsonl(tmp_path, _rows(), "same-time.jsonl")
    argv = ("validate", path) if command == "validate" else (*EVALUATE_XPYD, "--workload", path)
    one_error_line(cli(*argv), "same-time.jsonl: arrival: ", "5 request(s) arrive over 0 s", "arrival: poisson")


def test_a_partial_last_block_is_one_id(cli: Callable[..., CliResult], tmp_path: Path) -> None:
    """What "divides" means: ``ceil(input_length / block_tokens)`` ids, the last block partial (Mooncake's README:
    6,955 tokens carry 14 ids of 512-token blocks). 7,236 tokens with 15 ids is good; a block size that makes the
    count differ (500: ceil(23141 / 500) = 47 on line 7 of the sample) names the trace's line through the workload."""
    assert cli("validate", _jsonl(tmp_path, _spread(_rows()), "good.jsonl")).code == 0
    workload = tmp_path / "blocks.yaml"
    workload.write_text(f"name: blocks\ntrace: {{file: {SAMPLE}, format: mooncake, block_tokens: 500}}\n")
    for argv in (("validate", workload), (*EVALUATE_XPYD, "--workload", workload)):
        one_error_line(cli(*argv), "blocks.yaml: trace: ", "line 7, field hash_ids", "expected ceil(23141 / 500) = 47")


def test_a_trace_named_by_a_relative_path(
    cli: Callable[..., CliResult], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``.jsonl`` given by a path relative to the working folder is read from there (it was once looked for under
    its own folder twice: ``sub/sub/t.jsonl``), and its errors still name it once."""
    (tmp_path / "sub").mkdir()
    _jsonl(tmp_path / "sub", _spread(_rows()), "t.jsonl")
    monkeypatch.chdir(tmp_path)
    assert cli("validate", "sub/t.jsonl").code == 0
    assert cli(*EVALUATE_XPYD, "--workload", "sub/t.jsonl").code == 0
    rows = _rows()
    _empty_ids(rows)
    _jsonl(tmp_path / "sub", rows, "bad.jsonl")
    one_error_line(cli("validate", "sub/bad.jsonl"), "error: sub/bad.jsonl: line 3, field hash_ids")


# ------------------------------------------------------------------------------------------- storage tiers
@pytest.mark.parametrize(
    ("name", "field", "phrase"),
    [
        ("zero_capacity.yaml", "capacity_bytes", "> 0"),
        ("no_bandwidth.yaml", "read_bytes_per_s", "missing"),
        ("zero_bandwidth.yaml", "read_bytes_per_s", "> 0"),
    ],
)
def test_bad_storage_tier_file(
    cli: Callable[..., CliResult], tmp_path: Path, name: str, field: str, phrase: str
) -> None:
    """The tier file itself (``pdplan validate``), and a scenario whose cache names it by path (``evaluate``)."""
    one_error_line(cli("validate", STORAGE / name), f"{name}: {field}", phrase)
    scenario = tmp_path / "tier-by-path.yaml"
    scenario.write_text(
        CHAT.read_text().replace("{storage: host-dram-pcie5, capacity: 1 TiB}", f"{{storage: {STORAGE / name}}}")
    )
    one_error_line(cli("evaluate", scenario), f"{name}: {field}", phrase)


def test_a_cache_tier_of_zero_bytes(cli: Callable[..., CliResult], tmp_path: Path) -> None:
    """``cache.tiers[].capacity: 0`` is an error (0 means "leave the tier out" only in a search list)."""
    scenario = tmp_path / "zero-tier.yaml"
    scenario.write_text(CHAT.read_text().replace("capacity: 1 TiB}", "capacity: 0}"))
    for argv in (("validate", scenario), ("evaluate", scenario)):
        one_error_line(cli(*argv), "zero-tier.yaml: cache.tiers.0.capacity", "size > 0", "tier_capacities")
    scenario.write_text(CHAT.read_text().replace("[[0, 256 GiB, 1 TiB]]", "[[-1 GiB, 1 TiB]]"))
    one_error_line(cli("validate", scenario), "search.cache.tier_capacities.0.0", "size >= 0")


# ------------------------------------------------------------------------------------------- workload laws
SESSIONS = """\
name: sessions
sessions:
  turns: {turns}
  new_tokens: {{dist: fixed, value: 100}}
  output_tokens: {{dist: fixed, value: 100}}
  think_time: {{dist: exponential, mean: 30s}}
"""
PREFIXES = """\
name: prefixes
shared_prefix:
  num_prefixes: 10
  prefix_tokens: {{dist: fixed, value: 1000}}
  question_tokens: {{dist: fixed, value: 100}}
  output_tokens: {{dist: fixed, value: 100}}
  popularity: {{kind: zipf, s: {s}}}
"""


@pytest.mark.parametrize("command", ["validate", "evaluate"])
@pytest.mark.parametrize(
    ("turns", "field"),
    [
        ("{dist: fixed, value: 0}", "sessions.turns.fixed.value"),
        ("{dist: geometric, mean: 0.5}", "sessions.turns.geometric.mean"),
        ("{dist: uniform, min: 0, max: 3}", "sessions.turns.uniform.min"),
        ("{dist: histogram, values: [0, 2], weights: [1, 1]}", "sessions.turns.histogram.values.0"),
    ],
)
def test_turn_count_below_one(
    cli: Callable[..., CliResult], tmp_path: Path, turns: str, field: str, command: str
) -> None:
    path = tmp_path / "turns.yaml"
    path.write_text(SESSIONS.format(turns=turns))
    argv = ("validate", path) if command == "validate" else (*EVALUATE_XPYD, "--workload", path)
    one_error_line(cli(*argv), f"turns.yaml: {field}", "greater than or equal to 1")


@pytest.mark.parametrize("command", ["validate", "evaluate"])
@pytest.mark.parametrize(
    ("s", "phrase"),
    [("11", "less than or equal to 10"), ("-0.5", "greater than or equal to 0"), (".nan", "finite number")],
)
def test_zipf_exponent_out_of_range(
    cli: Callable[..., CliResult], tmp_path: Path, s: str, phrase: str, command: str
) -> None:
    path = tmp_path / "zipf.yaml"
    path.write_text(PREFIXES.format(s=s))
    argv = ("validate", path) if command == "validate" else (*EVALUATE_XPYD, "--workload", path)
    one_error_line(cli(*argv), "zipf.yaml: shared_prefix.popularity.zipf.s", phrase)


def test_zipf_exponents_at_the_ends_of_the_range_are_read(cli: Callable[..., CliResult], tmp_path: Path) -> None:
    for s in (0, 10):
        path = tmp_path / f"zipf{s}.yaml"
        path.write_text(PREFIXES.format(s=s))
        assert cli("validate", path).code == 0


# ------------------------------------------------------------------------------------------- inference-perf
@pytest.mark.parametrize("command", ["validate", "evaluate"])
@pytest.mark.parametrize("data_type", ["sharegpt", "random", "mock"])
def test_inference_perf_unknown_data_type(
    cli: Callable[..., CliResult], tmp_path: Path, data_type: str, command: str
) -> None:
    path = tmp_path / "ip.yaml"
    path.write_text(f"load:\n  type: constant\n  stages: [{{rate: 1, duration: 30}}]\ndata:\n  type: {data_type}\n")
    argv = ("validate", path) if command == "validate" else (*EVALUATE_XPYD, "--workload", path)
    one_error_line(cli(*argv), "ip.yaml: data.type", f"data type {data_type!r} is not supported", "shared_prefix")
