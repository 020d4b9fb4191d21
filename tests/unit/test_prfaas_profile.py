"""Measured prefill profiles of the PrfaaS model: interpolation, holding and refusals (pdplan.serving.prfaas.profile),
and the packaged profile files and their errors (pdplan.io.profiles)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pdplan.errors import SpecError
from pdplan.io.profiles import load_profile, resolve_profile
from pdplan.serving.prfaas.profile import MeasuredProfile


def test_profile_interpolates_holds_and_rejects() -> None:
    prof = MeasuredProfile(np.array([1024.0, 8192.0]), np.array([0.4, 0.7]), np.array([1e8, 3e8]), source="x.csv")
    assert prof.prefill_time_s(np.array([1024.0, 8192.0, 100.0])).tolist() == pytest.approx([0.4, 0.7, 0.4])
    assert prof.kv_bytes_of(np.array([4608.0]))[0] == pytest.approx(2e8)
    with pytest.raises(SpecError, match="profile ends at 8,192"):
        prof.check_covers(131072, "the workload")
    with pytest.raises(SpecError, match="strictly increasing"):
        MeasuredProfile(np.array([8.0, 4.0]), np.array([0.1, 0.2]))
    with pytest.raises(SpecError, match="non-decreasing"):
        MeasuredProfile(np.array([4.0, 8.0]), np.array([0.3, 0.2]))


def test_profile_files(tmp_path: Path) -> None:
    table = load_profile(resolve_profile("prfaas-1t-hybrid-h200"))
    assert table.tokens.tolist() == [1024, 8192, 32768, 131072]
    phi_gbps = table.kv_bytes * 8 / table.prefill_s / 1e9  # Table 5: 3.61 / 3.59 / 3.19 / 2.62
    assert phi_gbps.tolist() == pytest.approx([3.61, 3.59, 3.19, 2.62], rel=0.011)
    bad = tmp_path / "bad.csv"
    bad.write_text("tokens,seconds\n1,2\n3,4\n")
    with pytest.raises(SpecError, match="expected tokens,prefill_s"):
        load_profile(bad)
    bad.write_text("tokens,prefill_s\n1,2\n3,-4\n")
    with pytest.raises(SpecError, match="row 3: prefill_s"):
        load_profile(bad)
    with pytest.raises(SpecError, match="unknown prefill profile"):
        resolve_profile("no-such-profile")
