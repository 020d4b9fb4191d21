"""The overlap scheduler's late first token, iteration by iteration: token 1 reaches the client k iterations after
the iteration that sampled it.

An engine with overlap (async) scheduling launches iteration s + 1 before it has processed the output of
iteration s: vLLM's ``async_scheduling`` (the engine core's batch queue, ``EngineCore.step_with_batch_queue``),
SGLang's overlap scheduler (``Scheduler.event_loop_overlap``: ``process_batch_result`` of the last batch runs after
the next batch is launched) and TensorRT-LLM's overlap scheduler (which "introduces one extra decoding step",
``features/overlap-scheduler``). The engine profile counts the iterations a first token waits so
(``scheduling.overlap_extra_steps`` = k, :class:`pdplan.specs.engine.Scheduling`). Here an instance tells
:class:`OverlapLag` when an iteration samples a request's token 1 (:meth:`OverlapLag.sampled`) and when its
iterations end (:meth:`OverlapLag.ended`); the token is out at the end of the k-th iteration that ends after the
sampling one, with the iterations' own simulated lengths (whatever they carry: decode steps, mixed steps, prefill
passes). An instance that goes idle launches nothing behind the token, which is then out at once
(:meth:`OverlapLag.idle`: both loops above process the last result when no batch is left to launch).

Every later token streams as many iterations behind its own step, so the intervals between tokens, and TPOT, are
the engine's; :func:`pdplan.sim.metrics.build_result` adds the first token's lag to token 1 and to the last token
(E2E) alike. The lag is kept per request in :attr:`pdplan.sim.batch.Timeline.first_lag`.
"""

from __future__ import annotations

from collections.abc import Sequence

from pdplan.errors import SpecError
from pdplan.sim.batch import Timeline


def overlap_iterations(steps: float) -> int:
    """``scheduling.overlap_extra_steps`` as a count of iterations (SpecError unless a whole number ≥ 0)."""
    k = int(steps)
    if k != steps or k < 0:
        raise SpecError(f"the simulator emits token 1 a whole number of iterations late; overlap steps {steps!r}")
    return k


class OverlapLag:
    """Token 1's emission k iterations after its sampling iteration, for one instance (module docstring)."""

    __slots__ = ("iterations", "pending", "tl")

    def __init__(self, iterations: int, timeline: Timeline) -> None:
        self.iterations = iterations
        self.tl = timeline
        self.pending: dict[int, tuple[float, int]] = {}
        """request → (the end of its sampling iteration, iterations still to end before token 1 is out)."""

    def sampled(self, req: int, at_s: float) -> None:
        """The iteration ending at ``at_s`` sampled ``req``'s token 1 (recorded there as ``first_token``)."""
        self.tl.first_token[req] = at_s
        if self.iterations == 0:
            self.tl.first_lag[req] = 0.0
        else:
            self.pending[req] = (at_s, self.iterations)

    def ended(self, ends_s: Sequence[float]) -> None:
        """Iterations ended at ``ends_s`` (ascending): each pending token counts those after its sampling one."""
        if not self.pending:
            return
        for req, (at, left) in list(self.pending.items()):
            later = [t for t in ends_s if t > at]
            if len(later) >= left:
                self.tl.first_lag[req] = later[left - 1] - at
                del self.pending[req]
            elif later:
                self.pending[req] = (at, left - len(later))

    def idle(self, now_s: float) -> None:
        """The instance launches nothing at ``now_s``: every pending token is out now."""
        for req, (at, _) in self.pending.items():
            self.tl.first_lag[req] = now_s - at
        self.pending.clear()
