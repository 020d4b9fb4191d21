"""SGLang's KV admission as the simulator's colocated instance runs it (:mod:`pdplan.sim.colocated_instance`).

Written from SGLang's scheduler (sgl-project/sglang 0.5.x; the rule read in stored copies of
``python/sglang/srt/managers/schedule_policy.py`` (latest main at commit 00550cd11b35), ``schedule_batch.py``
(``retract_decode``) and ``scheduler.py`` (``update_running_batch``, ``self_check_during_idle``)), not from pdplan's
closed form (:mod:`pdplan.queueing.kv_admission`), which it checks:

* **Admission** (``PrefillAdder.add_one_req``): a waiting request is admitted while ``extend_input_len +
  min(max_new_tokens − len(output_ids), CLIP_MAX_NEW_TOKENS) < rem_total_tokens``, the free KV less an offset: every
  running request's ``new_token_ratio × min(max_new_tokens − len(output_ids), CLIP)``
  (``_get_running_request_total_token_offset``) plus, for the requests admitted earlier and still in prefill, their
  prompt and ``min(max_new_tokens, CLIP)`` (``_update_prefill_budget``). In the simulator's terms a request with n
  decode steps has max_new_tokens = n + 1 and, after j steps, j + 1 output tokens: its remaining output is its steps
  left (:meth:`RatioBook.reserve_tokens`), a new request's ``min(n + 1, c)``.
* **Decay** (``update_running_batch``): every decode batch that finds KV for its tokens lowers ``new_token_ratio`` by
  ``(init − min)/decay_steps`` down to ``min`` (0.7 → 0.098 over 600 steps by default): :meth:`RatioBook.decoded`.
* **Retraction** (``retract_decode``): when the next decode step does not fit (``check_decode_mem``: a free slot per
  running request), requests are retracted one by one, the one with the fewest output tokens first (ties: the
  longest prompt; the batch sorted by ``(len(output_ids), −len(origin_input_ids))`` descending and popped from the
  end), until the step fits; each frees its KV and goes back to the waiting queue (``_add_request_to_queue``
  appends it: the **tail**, FCFS), where it recomputes its prompt and output so far as a prefill. The ratio becomes
  ``min(1, (Σ len(output_ids) + retract_steps·B)/Σ max_new_tokens)`` over the B requests left, from which it
  decays again (:meth:`RatioBook.retracted`).
* **Idle** (``self_check_during_idle``): with nothing to run the ratio returns to ``init``.

Why the decay and not the floor alone (the closed form's r): the simulator is the check of that simplification.
Under a KV-bound load every retraction lifts the ratio to about (decoded share + 20 steps), so the engine admits
fewer requests than the floor allows until it has decayed again; only a simulator that runs the decay shows how much
of the time the floor holds. Left out: the radix cache's reuse of a retracted request's prompt (the simulator
recomputes the whole context, as for vLLM), the ``batch_is_full`` latch (after a refusal SGLang retries only once
the running batch shrinks; the simulator retries at every boundary, which succeeds between completions only through
the ratio's decay, since the running requests' counted tokens grow by 1 − r a step each) and page rounding (one
token a page in SGLang's default).
"""

from __future__ import annotations

from dataclasses import dataclass

from pdplan.errors import SpecError


@dataclass(frozen=True, slots=True)
class RatioAdmission:
    """SGLang's admission parameters (module docstring): the ratio's start and floor, its decay, the clip and the
    retraction's look-ahead; from the engine profile's ``kv_reserve_ratio`` (:mod:`pdplan.sim.deployment`)."""

    init_ratio: float
    min_ratio: float
    decay_steps: int
    clip_tokens: int
    retract_steps: int

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_ratio <= self.init_ratio <= 1.0:
            raise SpecError(f"ratio admission needs 0 <= min_ratio <= init_ratio <= 1, got {self}")
        if self.decay_steps < 1 or self.clip_tokens < 1 or self.retract_steps < 0:
            raise SpecError(f"ratio admission needs decay_steps, clip_tokens >= 1, retract_steps >= 0, got {self}")


class RatioBook:
    """One instance's ratio and the running requests' remaining outputs (module docstring). ``ends[req]`` is the
    step counter (:attr:`pdplan.sim.batch.ActiveSet.s`) at which running request ``req`` takes its last step, so its
    remaining output at counter s is ``ends[req] − s``; their sum is kept, and the requests whose remaining output
    can exceed the clip are kept apart so that Σ min(left, c) needs no pass over the batch."""

    __slots__ = ("decay", "ends", "ends_sum", "long", "ratio", "rule")

    def __init__(self, rule: RatioAdmission) -> None:
        self.rule = rule
        self.ratio = rule.init_ratio
        self.decay = (rule.init_ratio - rule.min_ratio) / rule.decay_steps
        self.ends: dict[int, int] = {}
        self.ends_sum = 0
        self.long: set[int] = set()  # running requests that joined with more steps left than the clip

    def join(self, req: int, now_step: int, steps_left: int) -> None:
        """``req`` joins the decode batch at counter ``now_step`` with ``steps_left`` steps (its remaining output)."""
        end = now_step + steps_left
        self.ends[req] = end
        self.ends_sum += end
        if steps_left > self.rule.clip_tokens:
            self.long.add(req)

    def leave(self, req: int) -> None:
        """``req`` finished or was retracted."""
        self.ends_sum -= self.ends.pop(req)
        self.long.discard(req)

    def reserve_tokens(self, now_step: int) -> float:
        """The running requests' offset ``ratio × Σ min(remaining output, c)`` at counter ``now_step``. Example:
        ends 10 and 5000 at s = 0, c = 4096, ratio 0.5: 0.5 × (10 + 4096) = 2053."""
        clip = self.rule.clip_tokens
        left = self.ends_sum - len(self.ends) * now_step
        left -= sum(max(self.ends[r] - now_step - clip, 0) for r in self.long)
        return self.ratio * float(left)

    def decoded(self, steps: int) -> None:
        """``steps`` decode steps found their KV: the ratio decays (module docstring)."""
        self.ratio = max(self.ratio - steps * self.decay, self.rule.min_ratio)

    def retracted(self, output_tokens: int, max_new_tokens: int, running: int) -> None:
        """After a retraction, over the ``running`` requests left: ``min(1, (Σ output + retract_steps·B)/Σ
        max_new_tokens)``. Example: 2 requests left with 30 of 200 output tokens out, 20-step look-ahead: (30 +
        40)/200 = 0.35."""
        if running < 1 or max_new_tokens <= 0:
            raise SpecError("a retraction must leave a running request (SGLang never retracts the last)")
        self.ratio = min(1.0, (output_tokens + self.rule.retract_steps * running) / max_new_tokens)

    def idle(self) -> None:
        """Nothing to run: the ratio returns to its start (module docstring)."""
        self.ratio = self.rule.init_ratio
