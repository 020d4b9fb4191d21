"""Keep ``--dist loadgroup`` grouping tests by their ``xdist_group`` mark under pytest 9.2.

pytest-xdist (3.8.0, the newest release) tells its scheduler a test's group by appending ``@NAME`` to the test's node
id on the worker, writing the legacy ``item._nodeid`` field. pytest 9.2 reads node ids from a structured
``item._id`` instead, so the suffix is lost and every marked test is scheduled on its own: tests that share a
session or module fixture (``optimized``, ``cli_shared``, the simulator points of tests/reference) land on both
workers and each computes it (pytest-dev/pytest-xdist issue #1386, fix proposed in PR #1388, neither released).
Measured here on 2026-12-07 with a module-scoped fixture of a grouped module: set up once on each of the two
workers without this, once in all with it.

:func:`restore_group_suffixes` writes the suffix where xdist's did not take; it does nothing where xdist's did (older
pytest, or a fixed xdist), and fails the collection rather than let the grouping be lost silently.
"""

from __future__ import annotations

import pytest


def _group_suffix(item: pytest.Item) -> str | None:
    """``@A_B`` for an item marked ``xdist_group("A")`` and ``xdist_group("B")``, as xdist spells it; None if none."""
    names = {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")}
    return "@" + "_".join(sorted(names)) if names else None


def restore_group_suffixes(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker run with ``--dist loadgroup``, give each marked item the ``@group`` node id suffix that
    xdist's scheduler groups on (run after xdist's own hook: ``trylast``)."""
    if not getattr(config.option, "loadgroup", False):  # not a loadgroup worker (no xdist, -n 0, another --dist)
        return
    for item in items:
        suffix = _group_suffix(item)
        if suffix is None or item.nodeid.endswith(suffix):
            continue
        structured = getattr(item, "_id", None)
        if structured is not None:
            item._id = type(structured).parse(item.nodeid + suffix)
        if not item.nodeid.endswith(suffix):
            raise pytest.UsageError(
                f"--dist loadgroup: could not mark {item.nodeid} with its group {suffix[1:]!r} "
                "(tests/support/xdist_groups.py; pytest-xdist issue #1386)"
            )
