"""The Mooncake reader's streaming (pdplan/io/traces_mooncake.py): a trace read block by block, whatever the block
size, gives the arrays of a straightforward parse (every line through ``json.loads``, the columns built at once).

The trace mixes Mooncake's own layout (the regular-expression path) with compact and reordered lines (the line-by-line
path), blank lines and float timestamps, and holds more requests and ids than a column's first buffer (1,024), so the
columns grow several times; blocks from 64 bytes (most lines longer than a block) to the default 8 MiB.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pdplan.io import traces_mooncake
from pdplan.io.traces_mooncake import read_mooncake_trace


def _trace_text(n: int, seed: int = 7) -> str:
    rng = np.random.default_rng(seed)
    lines, t = [], 0
    for i in range(n):
        t += int(rng.integers(0, 50))
        blocks = int(rng.integers(1, 40))
        inputs = int(rng.integers(512 * (blocks - 1) + 1, 512 * blocks + 1))
        record = {
            "timestamp": t if i % 7 else float(t),  # "4306.0" leaves Mooncake's layout
            "input_length": inputs,
            "output_length": int(rng.integers(1, 2000)),
            "hash_ids": [0, *rng.integers(1, 10**6, blocks - 1).tolist()],
        }
        if i % 5 == 1:
            lines.append(json.dumps(record, separators=(",", ":")))
        elif i % 11 == 3:
            lines.append(json.dumps(dict(reversed(list(record.items())))))
        else:
            lines.append(json.dumps(record))
        if i % 13 == 0:
            lines.append("")
    return "\n".join(lines) + "\n"


def _straightforward(text: str) -> dict[str, np.ndarray]:
    numbered = [(k, json.loads(line)) for k, line in enumerate(text.split("\n"), start=1) if line.strip()]
    rows = [row for _, row in numbered]
    counts = [len(row["hash_ids"]) for row in rows]
    return {
        "arrival_s": np.array([row["timestamp"] for row in rows], dtype=np.float64) / 1000.0,
        "input_tokens": np.array([row["input_length"] for row in rows], dtype=np.int64),
        "output_tokens": np.array([row["output_length"] for row in rows], dtype=np.int64),
        "hash_offsets": np.concatenate(([0], np.cumsum(counts))).astype(np.int64),
        "hash_ids": np.array([h for row in rows for h in row["hash_ids"]], dtype=np.int64),
        "line_numbers": np.array([k for k, _ in numbered], dtype=np.int64),
    }


@pytest.mark.parametrize("block_bytes", [64, 4093, 1 << 16, traces_mooncake.BLOCK_BYTES])
def test_streamed_read_equals_a_straightforward_parse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block_bytes: int
) -> None:
    text = _trace_text(3000)
    path = tmp_path / f"t{block_bytes}.jsonl"
    path.write_text(text)
    monkeypatch.setattr(traces_mooncake, "BLOCK_BYTES", block_bytes)
    trace = read_mooncake_trace(path)
    expected = _straightforward(text)
    assert expected["hash_ids"].size > 4 * 1024  # the id column grows several times
    for name, want in expected.items():
        got = getattr(trace, name)
        assert got.dtype == want.dtype, name
        assert not got.flags.writeable, name
        assert np.array_equal(got, want), name
