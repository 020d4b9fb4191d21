"""pdplan.numerics.scipy_parts and pdplan.numerics.special: SciPy's compiled special functions imported without
scipy.special's __init__ are the very ufuncs scipy.special exports, and a fresh process that uses them imports neither
scipy.special nor what its __init__ pulls in."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import scipy
import scipy.special

from pdplan.numerics import scipy_parts, special
from pdplan.numerics.scipy_parts import scipy_version

PRIVATE = scipy_parts.private_layout_known()


@pytest.mark.parametrize("name", special.__all__)
def test_same_ufunc_objects_as_scipy_special(name: str) -> None:
    """The same objects, hence the same doubles for every argument."""
    assert getattr(special, name) is getattr(scipy.special, name)


def test_hand_worked_values() -> None:
    """P(2, 1) = 1 − 2/e; Γ(5) = 24; Φ(0) = ½; Φ⁻¹(Φ(1.5)) = 1.5; Q(1, x) = e^{-x}."""
    assert special.gammainc(2.0, 1.0) == pytest.approx(1.0 - 2.0 / 2.718281828459045, rel=1e-15)
    assert special.gammaln(5.0) == pytest.approx(3.1780538303479458, rel=1e-15)
    assert special.ndtr(0.0) == 0.5
    assert special.ndtri(special.ndtr(1.5)) == pytest.approx(1.5, rel=1e-14)
    assert special.gammaincc(1.0, 0.7) == pytest.approx(0.4965853037914095, rel=1e-15)
    assert special.gammaincinv(3.0, special.gammainc(3.0, 2.5)) == pytest.approx(2.5, rel=1e-13)


def test_scipy_version_parsing() -> None:
    assert scipy_version("1.17.1") == (1, 17)
    assert scipy_version("1.18.0rc1") == (1, 18)
    assert scipy_version("2.0") == (2, 0)


def test_already_imported_package_is_used() -> None:
    """With scipy.special imported (this test module did), the submodule is the package's own."""
    module = scipy_parts.import_without_package_init("scipy.special", "_ufuncs")
    assert module is sys.modules["scipy.special._ufuncs"]
    assert module.gammainc is scipy.special.gammainc


@pytest.mark.skipif(not PRIVATE, reason=f"SciPy {scipy.__version__}: scipy.special itself is imported")
def test_fresh_process_skips_the_package_init_and_a_later_import_works() -> None:
    """Importing pdplan.numerics.special leaves scipy.special (and numpy.testing, which its __init__ imports) out of
    sys.modules; the stand-in is gone, and a later ``import scipy.special`` gives the same ufunc objects."""
    code = (
        "import sys, json\n"
        "from pdplan.numerics import special\n"
        "before = [m for m in ('scipy.special', 'numpy.testing', 'scipy.special._support_alternative_backends')"
        " if m in sys.modules]\n"
        "import scipy, scipy.special\n"
        "same = all(getattr(special, n) is getattr(scipy.special, n) for n in special.__all__)\n"
        "print(json.dumps([before, same, hasattr(scipy.special, 'logsumexp'), float(scipy.special.erf(0.5))]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    before, same, full, erf = json.loads(out.stdout.splitlines()[-1])
    assert before == []
    assert same is True
    assert full is True
    assert erf == pytest.approx(0.5204998778130465, rel=1e-15)
