"""pdplan.numerics.sorted_stats: ``numpy.unique(values)``'s array and ``numpy.median(values)``'s double, without
importing ``numpy.ma``."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from pdplan.numerics.sorted_stats import median, sorted_unique

floats = hnp.arrays(
    np.float64,
    st.integers(0, 60),
    elements=st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True).filter(lambda x: x != 0.0),
)
finite = hnp.arrays(
    np.float64,
    st.integers(1, 60),
    elements=st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300),
)
ints = hnp.arrays(np.int64, st.integers(0, 60), elements=st.integers(-5, 5))


def test_unique_hand_worked() -> None:
    """[3, 1, 2, 3, 1] → [1, 2, 3]; NaNs collapse to one at the end; an empty array stays empty; shape is flattened."""
    assert sorted_unique(np.array([3.0, 1.0, 2.0, 3.0, 1.0])).tolist() == [1.0, 2.0, 3.0]
    out = sorted_unique(np.array([np.nan, 2.0, np.nan, 1.0, 2.0]))
    assert out[:2].tolist() == [1.0, 2.0]
    assert out.size == 3
    assert np.isnan(out[2])
    assert sorted_unique(np.array([], dtype=np.float64)).size == 0
    assert sorted_unique(np.array([[5, 4], [4, 5]])).tolist() == [4, 5]


def test_unique_leaves_the_input_unsorted() -> None:
    values = np.array([3.0, 1.0, 2.0])
    sorted_unique(values)
    assert values.tolist() == [3.0, 1.0, 2.0]


@settings(max_examples=300, deadline=None)
@given(floats)
def test_unique_bit_for_bit_numpy(values: np.ndarray) -> None:
    """Same dtype and same bytes as ``numpy.unique`` (NaNs included), zeros left out: see the next test."""
    ours, numpys = sorted_unique(values), np.unique(values)
    assert ours.dtype == numpys.dtype
    assert ours.tobytes() == numpys.tobytes() or (
        np.array_equal(ours, numpys, equal_nan=True) and np.isnan(ours[-1])  # NaN payloads may differ
    )


@settings(max_examples=200, deadline=None)
@given(ints, st.lists(st.sampled_from([0.0, -0.0, 1.0, -1.0]), max_size=12))
def test_unique_ints_and_signed_zeros(values: np.ndarray, zeros: list[float]) -> None:
    """Integers: the same array. ``0.0`` and ``-0.0`` compare equal, so numpy keeps either; so may we."""
    assert sorted_unique(values).tobytes() == np.unique(values).tobytes()
    mixed = np.array(zeros, dtype=np.float64)
    assert np.array_equal(sorted_unique(mixed), np.unique(mixed))


def test_median_hand_worked() -> None:
    """[3, 1, 2] → 2; [4, 1, 3, 2] → (2 + 3) / 2 = 2.5; a NaN anywhere → NaN; empty → an error."""
    assert median(np.array([3.0, 1.0, 2.0])) == 2.0
    assert median(np.array([4.0, 1.0, 3.0, 2.0])) == 2.5
    assert median(np.array([[4], [1]])) == 2.5
    assert np.isnan(median(np.array([1.0, np.nan, 2.0])))
    with pytest.raises(ValueError, match="empty"):
        median(np.array([]))


@settings(max_examples=300, deadline=None)
@given(finite)
def test_median_bit_for_bit_numpy(values: np.ndarray) -> None:
    """The same double as ``numpy.median``, odd and even counts (a zero median's sign is not compared: ``-0.0`` and
    ``0.0`` may trade places, in numpy's partition as in our sort)."""
    ours, numpys = median(values), float(np.median(values))
    assert ours == numpys
    if ours != 0.0:
        assert np.float64(ours).tobytes() == np.float64(numpys).tobytes()


@settings(max_examples=100, deadline=None)
@given(ints.filter(lambda a: a.size > 0))
def test_median_of_integers(values: np.ndarray) -> None:
    assert median(values) == float(np.median(values))


def _imports_numpy_ma(call: str) -> bool:
    code = (
        "import sys, numpy as np; from pdplan.numerics.sorted_stats import median, sorted_unique; "
        f"{call}(np.array([2.0, 1.0, 2.0])); print('numpy.ma' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return {"True": True, "False": False}[out.stdout.strip()]


@pytest.mark.parametrize(("ours", "numpys"), [("sorted_unique", "np.unique"), ("median", "np.median")])
def test_no_numpy_ma_import(ours: str, numpys: str) -> None:
    """A fresh process that calls ours has not imported ``numpy.ma``; one that calls numpy's has (the reason this
    module exists: when numpy stops doing so, this test says the function can go)."""
    assert not _imports_numpy_ma(ours)
    assert _imports_numpy_ma(numpys)
