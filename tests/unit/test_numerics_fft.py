"""pdplan.numerics.fft: SciPy's real FFT through its compiled pocketfft, bit for bit ``scipy.fft``, and a fresh process
that uses it imports neither ``scipy.fft`` nor the array-API layer behind it."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import scipy
import scipy.fft
from hypothesis import given, settings
from hypothesis import strategies as st

from pdplan.numerics import fft, scipy_parts

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


def test_hand_worked_transform() -> None:
    """rfft([1, 2, 3, 4]) = [10, −2+2i, −2]; irfft of it gives the sequence back; 7 → 8 (2³), 11 → 12 (2²·3)."""
    spectrum = fft.rfft(np.array([1.0, 2.0, 3.0, 4.0]), 4)
    assert spectrum.tolist() == [10 + 0j, -2 + 2j, -2 + 0j]
    assert fft.irfft(spectrum, 4).tolist() == pytest.approx([1.0, 2.0, 3.0, 4.0], abs=1e-15)
    assert (fft.next_fast_len(7), fft.next_fast_len(11), fft.next_fast_len(16)) == (8, 12, 16)


def test_convolution_of_two_dice() -> None:
    """The sum of two fair dice: P(7) = 6/36, P(2) = P(12) = 1/36, through the padded product of spectra."""
    die = np.array([0.0] + [1.0 / 6] * 6)
    size = fft.next_fast_len(13)
    total = fft.irfft(fft.rfft(die, size) ** 2, size)[:13]
    assert total[7] == pytest.approx(6 / 36, abs=1e-15)
    assert total[2] == pytest.approx(1 / 36, abs=1e-15)
    assert total[12] == pytest.approx(1 / 36, abs=1e-15)


@settings(max_examples=60, deadline=None)
@given(values=st.lists(finite, min_size=1, max_size=300), pad=st.integers(min_value=0, max_value=200))
def test_bit_for_bit_scipy(values: list[float], pad: int) -> None:
    """Same doubles as scipy.fft for every length and padding, forward and inverse (odd and even n, cut spectra)."""
    x = np.array(values)
    n = len(values) + pad
    ours, theirs = fft.rfft(x, n), scipy.fft.rfft(x, n)
    assert ours.dtype == theirs.dtype
    assert np.array_equal(ours, theirs)
    for m in (n, n + 1, max(1, n // 2)):
        assert np.array_equal(fft.irfft(ours, m), scipy.fft.irfft(theirs, m))
    assert fft.next_fast_len(n) == scipy.fft.next_fast_len(n, real=True)


def test_bad_length_is_an_error() -> None:
    with pytest.raises(ValueError, match="invalid number of data points"):
        fft.rfft(np.array([1.0]), 0)


@pytest.mark.skipif(
    not scipy_parts.private_layout_known(), reason=f"SciPy {scipy.__version__}: scipy.fft itself is imported"
)
def test_fresh_process_skips_scipy_fft_and_a_later_import_works() -> None:
    """After a transform, scipy.fft, scipy.special and numpy.testing are not imported and no stand-in is left; a later
    ``import scipy.fft`` works and transforms alike."""
    code = (
        "import sys, json\n"
        "import numpy as np\n"
        "from pdplan.numerics import fft\n"
        "x = np.arange(5.0); ours = fft.rfft(x, 8)\n"
        "before = [m for m in ('scipy.fft', 'scipy.fft._pocketfft', 'scipy.special', 'numpy.testing')"
        " if m in sys.modules]\n"
        "import scipy.fft\n"
        "print(json.dumps([before, bool(np.array_equal(ours, scipy.fft.rfft(x, 8)))]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    before, same = json.loads(out.stdout.splitlines()[-1])
    assert before == []
    assert same is True
