"""``pdplan simulate``'s table rows of a run with storage read paths (:func:`pdplan.cli.simulate.cache_records`)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from pdplan.cli.simulate import cache_records


def _result(dual_path: Any) -> Any:
    reads = {"de_share": 0.5, "utilisation": {"PE SNIC": 0.4, "DE SNIC": 0.2}}
    sim = {"token_hit_ratio": 0.9, "tiers": [], "request_hit_share": 1.0, "read_paths": reads}
    cache = SimpleNamespace(tiers=[], token_hit_ratio=0.8, dual_path=dual_path)
    return SimpleNamespace(reuse=sim, evaluation=SimpleNamespace(cache=cache), settings={})


def test_read_path_rows_beside_the_closed_form_s_dual_path_report() -> None:
    report = SimpleNamespace(de_fraction=0.6, utilisation={"PE SNIC": 0.3, "DE SNIC": 0.25})
    rows = {r["quantity"]: r for r in cache_records(_result(report))}
    assert rows["read_paths_de_share"]["closed_form"] == 0.6
    assert rows["read_paths_de_share"]["rel_error"] == pytest.approx(0.6 / 0.5 - 1)
    assert rows["read_paths_PE_SNIC_utilisation"]["simulated"] == 0.4
    assert rows["read_paths_DE_SNIC_utilisation"]["closed_form"] == 0.25


def test_read_path_rows_simulated_only_without_dual_reads() -> None:
    rows = {r["quantity"]: r for r in cache_records(_result(None))}
    assert rows["read_paths_de_share"]["closed_form"] is None
    assert rows["read_paths_PE_SNIC_utilisation"]["rel_error"] is None
