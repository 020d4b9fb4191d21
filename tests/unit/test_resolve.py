"""Scenario resolution (pdplan.serving.resolve): the share of requests clipped at the context window, as its warning
prints it."""

from __future__ import annotations

from pdplan.serving.resolve import _share


def test_a_small_clipped_share_is_not_printed_as_zero() -> None:
    """mooncake-leval used to warn that "0.00% of requests exceed the context window"."""
    assert _share(0.0231) == "2.31%"
    assert _share(4.2e-5) == "0.0042%"
    assert _share(1e-9) != "0.00%"
