"""Mooncake JSONL traces (pdplan/io/traces_mooncake.py; docs/reuse_workloads.md §3): the vendored sample, the CSR
arrays, both read paths agreeing, and every bad line as a one-line SpecError naming file, line and field."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pdplan.errors import EXIT_BAD_INPUT, SpecError
from pdplan.io import traces_mooncake
from pdplan.io.traces_mooncake import check_block_counts, load_mooncake_trace, read_mooncake_trace
from pdplan.io.workloads import load_trace, load_workload

SAMPLE = Path(__file__).parents[1] / "data" / "mooncake" / "conversation_trace_head200.jsonl"


def _line(ts: object = 0, inp: object = 1000, out: object = 10, ids: object = None, **extra: object) -> str:
    record = {"timestamp": ts, "input_length": inp, "output_length": out, "hash_ids": [0, 1] if ids is None else ids}
    record.update(extra)
    return json.dumps(record)


def _write(tmp_path: Path, lines: list[str], name: str = "t.jsonl", end: str = "\n") -> Path:
    path = tmp_path / name
    path.write_text(end.join(lines) + end)
    return path


def _fails(path: Path, expected: str, block_tokens: int = 512) -> str:
    with pytest.raises(SpecError) as info:
        load_mooncake_trace(path, block_tokens)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    assert expected in message, message
    assert info.value.exit_code == EXIT_BAD_INPUT
    return message


# ------------------------------------------------------------------------------------------- the vendored sample
def test_vendored_sample_reads_with_512_token_blocks() -> None:
    trace = load_mooncake_trace(SAMPLE, 512)
    assert trace.requests == 200
    assert trace.arrival_s[0] == 0.0
    assert trace.arrival_s[-1] == pytest.approx(72.0)  # the 200th request arrives at 72,000 ms
    assert trace.input_tokens[0] == 6758
    assert trace.output_tokens[0] == 500
    assert list(trace.request_hashes(0)) == list(range(14))  # ceil(6758 / 512) = 14 blocks
    assert np.all(trace.block_counts() == -(-trace.input_tokens // 512))
    assert np.all(trace.hash_ids[trace.hash_offsets[:-1]] == 0)  # every request starts with the shared block 0
    assert trace.hash_offsets[-1] == trace.hash_ids.size == 5537
    assert trace.input_tokens.dtype == np.int64
    assert trace.hash_offsets.dtype == np.int64
    assert not trace.hash_ids.flags.writeable


def test_sample_block_counts_fail_with_another_block_size() -> None:
    trace = read_mooncake_trace(SAMPLE)
    with pytest.raises(SpecError, match=r"line 1, field hash_ids: 14 block ids for input_length 6758; expected ceil"):
        check_block_counts(trace, 256, str(SAMPLE))


def test_general_path_reads_the_same_arrays(tmp_path: Path) -> None:
    """Compact separators leave Mooncake's own layout: the line-by-line path must give identical arrays."""
    compact = [json.dumps(json.loads(line), separators=(",", ":")) for line in SAMPLE.read_text().splitlines()]
    fast, general = read_mooncake_trace(SAMPLE), read_mooncake_trace(_write(tmp_path, compact))
    for name in ("arrival_s", "input_tokens", "output_tokens", "hash_offsets", "hash_ids", "line_numbers"):
        assert np.array_equal(getattr(fast, name), getattr(general, name)), name


def test_blocks_split_lines_and_count_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tiny blocks: lines longer than a block, many blocks, a last line without a newline; line numbers hold."""
    monkeypatch.setattr(traces_mooncake, "BLOCK_BYTES", 50)
    lines = [_line(ts=i, inp=512 * (i + 1), ids=list(range(i + 1))) for i in range(6)]
    lines[4] = _line(ts=4, inp=512 * 5, ids=[0, 1, 2, 3])  # 4 ids for 5 blocks, on line 5
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines))  # no trailing newline
    _fails(path, "line 5, field hash_ids: 4 block ids for input_length 2560; expected ceil(2560 / 512) = 5")


def test_blank_lines_and_crlf_are_read(tmp_path: Path) -> None:
    path = _write(tmp_path, [_line(ts=0), "", _line(ts=5, inp=600)], end="\r\n")
    trace = load_mooncake_trace(path, 512)
    assert list(trace.line_numbers) == [1, 3]
    assert list(trace.arrival_s) == [0.0, 0.005]


def test_float_timestamps_are_milliseconds(tmp_path: Path) -> None:
    trace = read_mooncake_trace(_write(tmp_path, [_line(ts=0.5), _line(ts=1500.25)]))
    assert list(trace.arrival_s) == pytest.approx([0.0005, 1.50025])


def test_load_trace_gives_lengths_and_seconds() -> None:
    data = load_trace(SAMPLE)
    assert data.input_tokens.size == 200
    assert data.arrival_s is not None
    assert data.arrival_s[10] == pytest.approx(3.0)


def test_a_jsonl_workload_replays_its_own_arrivals() -> None:
    spec = load_workload(SAMPLE)
    assert spec.trace is not None
    assert spec.trace.format == "mooncake"
    assert spec.trace.block_tokens == 512
    assert spec.arrival == "trace"
    assert spec.arrival_process().ca2 is None


def test_a_yaml_workload_names_the_trace_and_fills_the_block_size(tmp_path: Path) -> None:
    (tmp_path / "t.jsonl").write_text(SAMPLE.read_text())
    (tmp_path / "w.yaml").write_text("trace: t.jsonl\n")
    spec = load_workload(tmp_path / "w.yaml")
    assert spec.trace is not None
    assert spec.trace.block_tokens == 512
    (tmp_path / "w2.yaml").write_text("trace: {file: t.jsonl, format: mooncake, block_tokens: 256}\n")
    with pytest.raises(SpecError, match=r"w2\.yaml: trace: .*t\.jsonl: line 1, field hash_ids: 14 block ids"):
        load_workload(tmp_path / "w2.yaml")
    (tmp_path / "w3.yaml").write_text("trace: {file: t.jsonl, format: csv}\n")
    with pytest.raises(SpecError, match=r"w3\.yaml: trace: .*format csv does not match the file name"):
        load_workload(tmp_path / "w3.yaml")


# ------------------------------------------------------------------------------------------- bad lines
@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            json.dumps({"timestamp": 0, "input_length": 1000, "hash_ids": [0, 1]}),
            "line 2, field output_length: missing",
        ),
        (_line(inp=-5), "line 2, field input_length: -5 must be an integer >= 1"),
        (_line(out=0), "line 2, field output_length: 0 must be an integer >= 1"),
        (_line(inp=1000.5), "line 2, field input_length: 1000.5 must be an integer >= 1"),
        (_line(inp="1000"), "line 2, field input_length: '1000' must be an integer >= 1"),
        (_line(inp=True), "line 2, field input_length: True must be an integer >= 1"),
        (_line(ts=-1), "line 2, field timestamp: -1 must be a finite time in ms >= 0"),
        (_line(ts="soon"), "line 2, field timestamp: 'soon' must be a finite time"),
        ('{"timestamp": NaN, "input_length": 1000, "output_length": 10, "hash_ids": [0, 1]}', "field timestamp: nan"),
        (_line(ids=[]), "line 2, field hash_ids: [] must be a non-empty list"),
        (_line(ids=7), "line 2, field hash_ids: 7 must be a non-empty list"),
        (_line(ids=[0, -3]), "line 2, field hash_ids: block id -3 is not an integer in [0, 2^63)"),
        (_line(ids=[0, 1.5]), "line 2, field hash_ids: block id 1.5 is not an integer"),
        (_line(ids=[0, 2**64]), "line 2, field hash_ids: block id 18446744073709551616 is not an integer"),
        (
            _line(ids=[0, 1, 2]),
            "line 2, field hash_ids: 3 block ids for input_length 1000; expected ceil(1000 / 512) = 2",
        ),
        (_line(session_id="a"), "line 2, field session_id: unknown field; allowed: timestamp"),
        ("[1, 2]", "line 2: expected a JSON object, got list"),
        ('{"timestamp": 0, "input_length": 1000,', "line 2: malformed JSON"),
        ('{"timestamp": 00, "input_length": 1000, "output_length": 10, "hash_ids": [0, 1]}', "line 2: malformed JSON"),
    ],
    ids=lambda v: v if isinstance(v, str) and len(v) < 40 else None,
)
def test_bad_line_names_file_line_and_field(tmp_path: Path, line: str, expected: str) -> None:
    _fails(_write(tmp_path, [_line(), line]), expected)


@pytest.mark.parametrize(
    "body",
    ["[0, 01]", "[0,, 1]", "[0, 1,]", "[ ]", "[0 1]", "[0, 99999999999999999999]"],
    ids=["leading-zero", "double-comma", "trailing-comma", "blank", "no-comma", "overflow"],
)
def test_mooncake_layout_with_bad_ids_falls_back_and_fails(tmp_path: Path, body: str) -> None:
    """Lines in Mooncake's exact layout whose id list is not valid: the fast path must hand them on, not read them."""
    line = '{"timestamp": 0, "input_length": 1000, "output_length": 10, "hash_ids": ' + body + "}"
    path = _write(tmp_path, [_line(), line])
    with pytest.raises(SpecError, match=r"line 2"):
        load_mooncake_trace(path, 512)


def test_unsorted_timestamps_name_the_later_line(tmp_path: Path) -> None:
    path = _write(tmp_path, [_line(ts=0), _line(ts=3000), _line(ts=2999)])
    _fails(
        path, "line 3, field timestamp: 2999 is before the previous line's 3000 ms; timestamps must be non-decreasing"
    )


def test_a_block_size_that_does_not_divide_the_length_is_fine(tmp_path: Path) -> None:
    """The last block is partial: 1000 tokens in 512-token blocks is 2 ids, in 256-token blocks 4."""
    path = _write(tmp_path, [_line(inp=1000, ids=[0, 1])])
    assert load_mooncake_trace(path, 512).requests == 1
    _fails(path, "line 1, field hash_ids: 2 block ids for input_length 1000; expected ceil(1000 / 256) = 4", 256)


def test_empty_missing_and_folder(tmp_path: Path) -> None:
    empty = tmp_path / "e.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(SpecError, match="no requests"):
        read_mooncake_trace(empty)
    with pytest.raises(SpecError, match="file not found"):
        read_mooncake_trace(tmp_path / "nope.jsonl")
    (tmp_path / "d.jsonl").mkdir()
    with pytest.raises(SpecError, match="is a folder"):
        read_mooncake_trace(tmp_path / "d.jsonl")
    with pytest.raises(SpecError, match="block_tokens must be >= 1"):
        load_mooncake_trace(SAMPLE, 0)
