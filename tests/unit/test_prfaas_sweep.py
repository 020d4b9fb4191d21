"""The prompt lengths of ``pdplan transfer --sweep`` (pdplan.serving.prfaas.sweep ``parse_lengths``)."""

from __future__ import annotations

import pytest

from pdplan.errors import SpecError


def test_parse_lengths() -> None:
    from pdplan.serving.prfaas.sweep import parse_lengths

    assert parse_lengths("1K, 8k,32K,128K,500") == [1024, 8192, 32768, 131072, 500]
    with pytest.raises(SpecError, match="token count"):
        parse_lengths("1K,lots")
    with pytest.raises(SpecError, match="whole number"):
        parse_lengths("0.5K,0")
