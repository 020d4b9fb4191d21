"""Bad-input corpus: every file in tests/bad_inputs/workloads/*.yaml must raise a one-line SpecError.

Each YAML's first line may say ``# expect: <text>``; the message must then contain that text.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pdplan.errors import EXIT_BAD_INPUT, SpecError, UnknownNameError
from pdplan.io.workloads import load_preset_workload, load_trace, load_workload

CORPUS = Path(__file__).parents[1] / "bad_inputs" / "workloads"
BAD_FILES = sorted(CORPUS.glob("*.yaml"))
NO_COMMENT = {"empty.yaml": "empty", "binary.yaml": "binary", "not_utf8.yaml": "UTF-8"}


def _expected(path: Path) -> str:
    if path.name in NO_COMMENT:
        return NO_COMMENT[path.name]
    first = path.read_text().splitlines()[0]
    assert first.startswith("# expect: "), f"{path.name} lacks an '# expect:' line"
    return first.removeprefix("# expect: ")


def test_corpus_is_present() -> None:
    assert len(BAD_FILES) >= 30


@pytest.mark.parametrize("path", BAD_FILES, ids=[p.name for p in BAD_FILES])
def test_bad_workload_raises_one_line_spec_error(path: Path) -> None:
    with pytest.raises(SpecError) as info:
        load_workload(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(path))  # names the YAML file first
    assert _expected(path) in message
    assert info.value.exit_code == EXIT_BAD_INPUT


def test_missing_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"nope\.yaml: file not found"):
        load_workload(tmp_path / "nope.yaml")


def test_folder_is_not_a_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="folder"):
        load_workload(tmp_path)


def test_trace_errors_name_the_csv() -> None:
    with pytest.raises(SpecError, match=r"trace_non_positive\.csv: row 3, column input_tokens"):
        load_trace(CORPUS / "trace_non_positive.csv")


def test_unknown_preset_suggests_names() -> None:
    with pytest.raises(UnknownNameError, match="splitwise-coding"):
        load_preset_workload("splitwise-codin")
