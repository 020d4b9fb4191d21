"""pdplan.serving.cache_mechanisms (the guards) and cache_mechanism_calls (the entry points behind them): each guarded
entry point gives what the DualPath or PPD function of the same name gives, for the bundled examples with and
without each mechanism, and its first test says "off" exactly where that function's own does (a scenario without
the mechanism need not import its modules: tests/cli/test_startup_imports.py).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import load_scenario
from pdplan.serving import cache_mechanism_calls as calls
from pdplan.serving import cache_mechanisms as guarded
from pdplan.serving import dual_path_setup, ppd_model
from pdplan.serving.resolve import ResolvedScenario, resolve

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DUAL_PATH = "agent-dualpath.yaml"
PPD = ("chat-ppd.yaml",)
CASES = ("default.yaml", "chat-sessions.yaml", "shared-system-prompt.yaml", "chat-ppd.yaml", "agent-dualpath.yaml")


def _resolved(name: str) -> ResolvedScenario[Any]:
    return resolve(load_scenario(EXAMPLES / name), open_catalog())


@pytest.mark.parametrize("name", CASES)
def test_dual_path_guard_is_the_settings_own(name: str) -> None:
    res = _resolved(name)
    setting = dual_path_setup.dual_path_setting(res)
    assert guarded.reads_over_both_paths(res) == (setting is not None) == (name == DUAL_PATH)
    assert calls.dual_path_setting(res) == setting
    if res.cache is not None:
        assert calls.dual_path_cache(res, res.cache) == dual_path_setup.dual_path_cache(res, res.cache)


@pytest.mark.parametrize("name", CASES)
def test_ppd_guard(name: str) -> None:
    res = _resolved(name)
    assert guarded.ppd_applies(res) == (name in PPD)


def test_ppd_guard_needs_sessions_and_a_policy_other_than_pd() -> None:
    res = _resolved("chat-ppd.yaml")
    assert res.cache is not None
    spec = res.cache.spec.model_copy(
        update={"turn_placement": res.cache.spec.turn_placement.model_copy(update={"policy": "pd"})}
    )
    assert not guarded.ppd_applies(_with_spec(res, spec))
    assert ppd_model.ppd_applies is guarded.ppd_applies


def _with_spec(res: ResolvedScenario[Any], spec: Any) -> ResolvedScenario[Any]:
    assert res.cache is not None
    return dataclasses.replace(res, cache=dataclasses.replace(res.cache, spec=spec))


def test_a_model_without_ppd_has_no_placement() -> None:
    class Plain:
        pool = object()

    assert guarded.placement_of(Plain()) is None
    assert guarded.placement_of(object()) is None
