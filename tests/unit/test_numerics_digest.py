"""The array memo key (pdplan.numerics.digest): equal arrays give equal keys, and the parts' boundaries count."""

from __future__ import annotations

import numpy as np

from pdplan.numerics.digest import array_digest


def test_equal_values_give_the_same_key_and_a_changed_value_another() -> None:
    a = np.arange(6, dtype=np.float64)
    assert array_digest(a, a[:2]) == array_digest(a.copy(), np.array([0.0, 1.0]))
    b = a.copy()
    b[3] = np.nextafter(b[3], 10.0)
    assert array_digest(a) != array_digest(b)


def test_the_same_bytes_split_differently_are_different_keys() -> None:
    """``[0, 1, 2] + [3]`` and ``[0, 1] + [2, 3]`` concatenate to the same bytes; the length prefixes tell them apart,
    as they tell an absent optional part from a present one."""
    x = np.arange(4, dtype=np.int64)
    assert array_digest(x[:3], x[3:]) != array_digest(x[:2], x[2:])
    assert array_digest(x) != array_digest(x, np.array([], dtype=np.int64))
    assert len(array_digest(x)) == 16
    assert len(array_digest(x, digest_size=32)) == 32
