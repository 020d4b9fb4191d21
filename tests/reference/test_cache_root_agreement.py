"""The prefix cache's self-consistent goodput as one root (pdplan/serving/cache_root.py) against the bracket of goodput
searches it replaced (pdplan/serving/build.py at main 8927bf4, ``_Kept``/``_between``, closed to 1 % of the rate):
every plan of every bundled example with a prefix cache within 1 % of the bracket's goodput (docs/accuracy.md
§7.16)."""

from __future__ import annotations

import pytest
from support.optimized import Optimized

BRACKET_RPS = {
    "chat-ppd": (13.925893247941698, 8.125107479421231, 8.125107479421231, 2.0888454038251645, 0.9007072320889311),
    "chat-sessions": (
        15.068832032145055,
        12.600553037887005,
        21.455678853788093,
        21.455678853788175,
        42.778158019946424,
    ),
    "agent-dualpath": (8.925591089051892, 8.799511144335861, 35.095904846995076, 29.60291495256089, 28.804682621793777),
    "mooncake-trace": (
        1.6992819418882281,
        1.6979626289284224,
        1.361110243279469,
        1.2418093166419666,
        1.3450158590394585,
    ),
    "shared-system-prompt": (
        37.302528635660124,
        172.81958591482166,
        172.48931725946323,
        86.24344735967678,
        86.24344735967678,
    ),
}
"""``pdplan optimize examples/<name>.yaml -f json``'s plans' ``goodput_rps`` at main 8927bf4 (the bracket)."""
AGREEMENT_RTOL = 0.01
"""The bracket's own tolerance (1 % of the rate); the root's is 1 % of the lower of its first rate and goodput."""


@pytest.mark.slow
@pytest.mark.xdist_group("optimized")
@pytest.mark.parametrize("name", sorted(BRACKET_RPS))
def test_the_root_agrees_with_the_bracket(name: str, optimized: Optimized) -> None:
    goodputs = sorted(plan.goodput_rps for plan in optimized(name).plans)
    assert goodputs == pytest.approx(sorted(BRACKET_RPS[name]), rel=AGREEMENT_RTOL)
