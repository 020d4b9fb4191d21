"""Hypothesis properties of the unit parser: round trips, bits/bytes, prefixes."""

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from pdplan.units import (
    BINARY_PREFIX,
    SI_PREFIX,
    parse_rate_bytes_per_s,
    parse_size_bytes,
    parse_time_s,
)

values = st.floats(min_value=1e-6, max_value=1e6, allow_nan=False, allow_infinity=False)
si_prefixes = st.sampled_from(["", "k", "M", "G", "T", "P"])
bin_prefixes = st.sampled_from(sorted(BINARY_PREFIX))


@settings(deadline=None, max_examples=100)
@given(value=values, prefix=si_prefixes)
def test_size_round_trip_si(value: float, prefix: str) -> None:
    parsed = parse_size_bytes(f"{value!r} {prefix}B")
    assert math.isclose(parsed / SI_PREFIX[prefix], value, rel_tol=1e-12)


@settings(deadline=None, max_examples=100)
@given(value=values, prefix=bin_prefixes)
def test_size_round_trip_binary(value: float, prefix: str) -> None:
    parsed = parse_size_bytes(f"{value!r}{prefix}B")
    assert math.isclose(parsed / BINARY_PREFIX[prefix], value, rel_tol=1e-12)


@settings(deadline=None, max_examples=100)
@given(value=values, prefix=si_prefixes)
def test_bits_are_an_eighth_of_bytes(value: float, prefix: str) -> None:
    as_bits = parse_rate_bytes_per_s(f"{value!r} {prefix}b/s")
    as_bytes = parse_rate_bytes_per_s(f"{value!r} {prefix}B/s")
    assert math.isclose(as_bits * 8, as_bytes, rel_tol=1e-12)
    assert math.isclose(parse_rate_bytes_per_s(f"{value!r}{prefix}bps"), as_bits, rel_tol=1e-12)


@settings(deadline=None, max_examples=100)
@given(value=values)
def test_time_units_agree(value: float) -> None:
    assert math.isclose(parse_time_s(f"{value!r} ms"), value / 1e3, rel_tol=1e-12)
    assert math.isclose(parse_time_s(f"{value!r}us"), value / 1e6, rel_tol=1e-12)
    assert math.isclose(parse_time_s(repr(value)), value, rel_tol=1e-12)
