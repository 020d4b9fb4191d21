"""A process pool's tasks (pdplan.sweep.executors.groups): consecutive points of one scenario together, by hand."""

from pdplan.specs.sweep import SweepPoint
from pdplan.sweep.executors import GROUP_POINTS, groups


def test_consecutive_rates_of_one_scenario_share_a_task_of_at_most_four() -> None:
    assert GROUP_POINTS == 4
    chat = [SweepPoint(slo="chat", rate=r) for r in (5.0, 10.0, 20.0, 40.0, 80.0)]
    tight = [SweepPoint(slo="interactive", rate=5.0), SweepPoint(slo="interactive", gpus=8)]
    back = [SweepPoint(slo="chat", rate=1.0)]  # the same scenario as chat, but not next to it
    todo = list(enumerate(chat + tight + back))
    assert [[i for i, _ in g] for g in groups(todo)] == [[0, 1, 2, 3], [4], [5, 6], [7]]


def test_every_point_is_in_one_group_in_order() -> None:
    todo = [(i, SweepPoint(model=m, rate=float(r))) for i, (m, r) in enumerate((m, r) for m in "ab" for r in (1, 2, 3))]
    assert [p for g in groups(todo) for p in g] == todo
