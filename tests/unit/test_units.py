"""Unit parser: hand-checked conversions and clear errors (pdplan.units)."""

import pytest

from pdplan.errors import UnitError
from pdplan.units import (
    format_bytes,
    format_time,
    parse_flops_per_s,
    parse_rate_bytes_per_s,
    parse_size_bytes,
    parse_time_s,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("80 GiB", 80 * 2**30),
        ("141 GB", 141e9),
        ("512MiB", 512 * 2**20),
        ("8 Gb", 1e9),  # 8 gigabits = 1 gigabyte
        ("1 kB", 1e3),
        ("1 KiB", 1024.0),
        ("2.25 MiB", 2.25 * 2**20),
        (1024, 1024.0),
        ("100", 100.0),
    ],
)
def test_sizes(text: object, expected: float) -> None:
    assert parse_size_bytes(text) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3.35 TB/s", 3.35e12),
        ("400 Gb/s", 50e9),  # 400e9 bits / 8
        ("400 Gbps", 50e9),
        ("50 GB/s", 50e9),
        ("25 Gbps", 3.125e9),
        ("1 GiB/s", 2**30),
    ],
)
def test_rates(text: str, expected: float) -> None:
    assert parse_rate_bytes_per_s(text) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("989 TFLOPS", 989e12), ("989.4 TFLOP/s", 989.4e12), ("1.979 PFLOPS", 1.979e15), (5, 5.0)],
)
def test_flops(text: object, expected: float) -> None:
    assert parse_flops_per_s(text) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("400ms", 0.4),
        ("1.5 s", 1.5),
        ("2 us", 2e-6),
        ("2 µs", 2e-6),
        ("3", 3.0),
        (0.25, 0.25),
        ("1 min", 60.0),
        ("10ns", 1e-8),
    ],
)
def test_times(text: object, expected: float) -> None:
    assert parse_time_s(text) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    ("parser", "text"),
    [
        (parse_time_s, "3 parsecs"),
        (parse_time_s, ""),
        (parse_time_s, "fast"),
        (parse_time_s, True),
        (parse_time_s, "1e999 s"),
        (parse_size_bytes, "80 GiB/s"),
        (parse_size_bytes, "80 gib"),  # lowercase g is not a prefix
        (parse_rate_bytes_per_s, "3.35 TB"),  # a size is not a rate
        (parse_rate_bytes_per_s, None),
        (parse_flops_per_s, "989 TiFLOPS"),  # binary prefixes make no sense for FLOPs
        (parse_flops_per_s, "989 TB/s"),
    ],
)
def test_bad_units_raise_one_line(parser: object, text: object) -> None:
    with pytest.raises(UnitError) as info:
        parser(text)  # type: ignore[operator]
    assert "\n" not in str(info.value)
    assert "expected" in str(info.value)


def test_bits_vs_bytes_exact() -> None:
    # 1 byte = 8 bits exactly, at every prefix
    assert parse_rate_bytes_per_s("800 Gb/s") * 8 == parse_rate_bytes_per_s("800 GB/s")
    assert parse_size_bytes("16 Mib") * 8 == parse_size_bytes("16 MiB")


def test_formatting() -> None:
    assert format_bytes(1.5 * 2**30) == "1.50 GiB"
    assert format_time(0.0123) == "12.3 ms"
    assert format_time(2.5) == "2.50 s"
