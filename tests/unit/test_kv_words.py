"""The decode KV limit in words (pdplan.report.kv_words): xPyD binds on the mean occupancy and queues past the P99
one, and the optimise Markdown says so."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Cli = Callable[..., Any]


def test_kv_binding_words_name_the_mean_occupancy() -> None:
    from pdplan.report.kv_words import binding_words
    from pdplan.types import Binding

    words = binding_words(Binding.DECODE_KV, {"decode_kv": 0.6304})
    assert words == "decode KV capacity (mean KV occupancy 0.63)"
    assert binding_words(Binding.PREFILL_UTILISATION, {"decode_kv": 0.6}) == "prefill utilisation"


def test_optimize_markdown_explains_the_kv_limit(cli: Cli) -> None:
    result = cli("optimize", "--format", "markdown")
    assert result.code == 0
    assert "decode KV capacity" in result.out  # rank 2 of the default run binds on it
    assert "P99 occupancy" in result.out
    assert "mean occupancy" in result.out
