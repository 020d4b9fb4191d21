"""``pdplan transfer``: JSON keys bytes/time_s/exposed_s and exit codes."""

from __future__ import annotations

import json

import pytest

from pdplan.cli import run


def test_keys_and_layer_overlap(capsys: pytest.CaptureFixture[str]) -> None:
    base = [
        "transfer",
        "--model",
        "llama-3.1-70b",
        "--tokens",
        "4096",
        "--link",
        "ib-ndr",
        "--gpu",
        "h100-sxm",
        "--prefill-tp",
        "4",
        "--decode-tp",
        "4",
        "--format",
        "json",
    ]
    assert run(base) == 0
    req = json.loads(capsys.readouterr().out)
    assert run([*base, "--granularity", "layer"]) == 0
    layer = json.loads(capsys.readouterr().out)
    for doc in (req, layer):
        assert {"bytes", "time_s", "exposed_s"} <= set(doc)
    assert req["exposed_s"] == pytest.approx(req["time_s"])
    assert layer["exposed_s"] < req["exposed_s"]


@pytest.mark.parametrize(
    "args",
    [["--link", "ib-nd"], ["--granularity", "layer"], ["--granularity", "page", "--gpu", "l4"], ["--tokens", "0"]],
)
def test_bad_input_exits_2(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["transfer", "--model", "opt-66b", "--tokens", "512", "--link", "ib-hdr", *args]
    assert run(argv) == 2
    assert capsys.readouterr().err.startswith("error:")
