"""Reuse-heavy traffic as specs: multi-turn sessions and shared prefixes (docs/reuse_workloads.md §1, §2).

The blocks a workload file may hold besides its length laws; the readers of inference-perf configs, ``vllm bench
serve`` results and Mooncake traces fill the same blocks (docs/reuse_workloads.md §5–§7). The arrival processes are
in :mod:`pdplan.specs.arrivals`, the laws of turn counts and think times in :mod:`pdplan.specs.session_laws`.

* ``sessions:`` (:class:`SessionsSpec`): sessions of T turns (a law on integers ≥ 1); turn k's prompt is the
  session's history (an optional system prompt, then every earlier turn's new tokens and output) plus the turn's
  new tokens U; each turn answers O tokens; a think time separates a turn's answer from the next turn. The
  request-level laws (prompt, history, turn index) are derived in :mod:`pdplan.specs.token_pmf`. A rate, if
  given, is sessions/s or requests/s; a scenario's ``--rate`` is always requests/s (λ_req = λ_sessions·E[T]).
* ``shared_prefix:`` (:class:`SharedPrefixSpec`): N distinct prefixes, a request's prompt is one prefix plus its
  own question, the prefix drawn by popularity (uniform or Zipf, ``p_i ∝ i^−s``).

Specs hold no file I/O (docs/architecture.md §5); token counts are integers ≥ 1.
"""

import functools
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from pdplan.specs.arrivals import GammaArrival
from pdplan.specs.base import FrozenModel
from pdplan.specs.length_laws import FixedDist, HistogramDist, LognormalDist, NormalDist, UniformDist
from pdplan.specs.session_laws import (
    ExponentialTime,
    FixedTime,
    FixedTurns,
    GeometricTurns,
    HistogramTurns,
    LognormalTime,
    TimeLaw,
    TurnsLaw,
    UniformTime,
    UniformTurns,
)
from pdplan.specs.token_pmf import TokenPmf, length_pmf, sum_of_parts, turn_mixture
from pdplan.types import FloatArray

PartLaw = Annotated[FixedDist | UniformDist | NormalDist | LognormalDist | HistogramDist, Field(discriminator="dist")]
"""A length law for one part of a prompt (new tokens, a prefix, a question) or an output."""

MAX_PREFIXES = 10_000_000
"""Distinct prefixes: the popularity vector holds one float per prefix (80 MB at this cap)."""
MAX_ZIPF_S = 10.0
"""Largest Zipf exponent: at s = 10 the most popular prefix already holds ≥ 1/ζ(10) = 99.90 % of the requests
whatever N, so a larger exponent describes one prefix (write ``num_prefixes: 1``)."""

PositiveRate = Annotated[float, Field(gt=0.0, allow_inf_nan=False)]


# ------------------------------------------------------------------------------------------- sessions
class SessionRate(FrozenModel):
    """A session workload's own rate: exactly one of sessions/s or requests/s."""

    sessions_per_s: PositiveRate | None = None
    requests_per_s: PositiveRate | None = None

    @model_validator(mode="after")
    def _one(self) -> "SessionRate":
        if (self.sessions_per_s is None) == (self.requests_per_s is None):
            raise ValueError("give exactly one of sessions_per_s or requests_per_s")
        return self


class SessionsSpec(FrozenModel):
    """Multi-turn sessions (module docstring); turn k's prompt = history of turns < k + the turn's new tokens."""

    turns: TurnsLaw
    new_tokens: PartLaw
    output_tokens: PartLaw
    think_time: TimeLaw
    system_prompt_tokens: Annotated[int, Field(ge=0)] = 0
    distinct_system_prompts: Annotated[int, Field(ge=1, le=MAX_PREFIXES)] = 1
    rate: SessionRate | None = None

    def mean_turns(self) -> float:
        """E[T]."""
        return self.turns.mean_turns()

    def request_rate_per_s(self, sessions_per_s: float) -> float:
        """Requests/s of ``sessions_per_s`` new sessions a second: λ_req = λ_sessions·E[T]."""
        return sessions_per_s * self.mean_turns()

    def sessions_per_s(self, requests_per_s: float) -> float:
        """New sessions a second behind a request rate (a scenario's ``--rate`` is requests/s)."""
        return requests_per_s / self.mean_turns()

    def nominal_request_rate_per_s(self) -> float | None:
        """The workload's own rate in requests/s, if it gives one."""
        if self.rate is None:
            return None
        if self.rate.requests_per_s is not None:
            return float(self.rate.requests_per_s)
        assert self.rate.sessions_per_s is not None
        return self.request_rate_per_s(float(self.rate.sessions_per_s))

    def _turn_tokens_mean(self) -> float:
        return length_pmf(self.new_tokens).mean() + length_pmf(self.output_tokens).mean()

    def history_tokens_mean_at(self, turn: int) -> float:
        """Mean history (reusable) tokens of turn ``turn``: S + (k − 1)·(E[U] + E[O])."""
        if turn < 1:
            raise ValueError(f"turns count from 1, got {turn}")
        return self.system_prompt_tokens + (turn - 1) * self._turn_tokens_mean()

    def mean_history_tokens(self) -> float:
        """Mean history per request: S + E[K − 1]·(E[U] + E[O]), E[K − 1] = (E[T²] − E[T])/(2E[T])."""
        t1, t2 = self.turns.mean_turns(), self.turns.second_moment()
        return self.system_prompt_tokens + (t2 - t1) / (2.0 * t1) * self._turn_tokens_mean()

    def prompt_pmf(self) -> TokenPmf:
        """Law of a random request's prompt length (history + new tokens), on whole tokens."""
        return _session_laws(self.model_dump_json())[0]

    def history_pmf(self) -> TokenPmf:
        """Law of a random request's reusable tokens: its system prompt and every earlier turn of its session."""
        return _session_laws(self.model_dump_json())[1]

    def prompt_law(self) -> HistogramDist:
        """The prompt law as a ``histogram`` length law, for :mod:`pdplan.workload.bins`."""
        return _histogram_law(self.model_dump_json(), "sessions")


# ------------------------------------------------------------------------------------------- shared prefixes
class UniformPopularity(FrozenModel):
    kind: Literal["uniform"]


class ZipfPopularity(FrozenModel):
    """``p_i ∝ i^−s`` over prefixes i = 1..N; s = 0 is uniform."""

    kind: Literal["zipf"]
    s: Annotated[float, Field(ge=0.0, le=MAX_ZIPF_S, allow_inf_nan=False)]


Popularity = Annotated[UniformPopularity | ZipfPopularity, Field(discriminator="kind")]


class SharedPrefixSpec(FrozenModel):
    """N distinct prefixes; each request = one prefix (drawn by popularity) + its own question."""

    num_prefixes: Annotated[int, Field(ge=1, le=MAX_PREFIXES)]
    prefix_tokens: PartLaw
    question_tokens: PartLaw
    output_tokens: PartLaw
    popularity: Popularity = UniformPopularity(kind="uniform")
    questions_per_prefix: Annotated[int, Field(ge=1, le=MAX_PREFIXES)] | None = None
    """Distinct questions per prefix, sent in turn (inference-perf re-sends each prompt every N requests);
    ``None``: every question is new."""

    @field_validator("popularity", mode="before")
    @classmethod
    def _named(cls, value: Any) -> Any:
        return {"kind": value} if isinstance(value, str) else value

    def prefix_probabilities(self) -> FloatArray:
        """Share of requests per prefix, most popular first (uniform: 1/N each)."""
        if isinstance(self.popularity, ZipfPopularity) and self.popularity.s > 0:
            w = np.arange(1, self.num_prefixes + 1, dtype=np.float64) ** -self.popularity.s
            return np.asarray(w / w.sum())
        return np.full(self.num_prefixes, 1.0 / self.num_prefixes)

    def mean_prefix_tokens(self) -> float:
        """Mean reusable (prefix) tokens per request (each prefix's length is a draw of ``prefix_tokens``)."""
        return length_pmf(self.prefix_tokens).mean()

    def distinct_prompts(self) -> int | None:
        """How many different prompts the workload sends (None: every question is new)."""
        return None if self.questions_per_prefix is None else self.num_prefixes * self.questions_per_prefix

    def prompt_pmf(self) -> TokenPmf:
        """Law of a request's prompt: prefix + question, on whole tokens."""
        return _prefix_prompt(self.model_dump_json())

    def prompt_law(self) -> HistogramDist:
        """The prompt law as a ``histogram`` length law, for :mod:`pdplan.workload.bins`."""
        return _histogram_law(self.model_dump_json(), "shared_prefix")


# ------------------------------------------------------------------------------------------- cached laws
# Keyed by the spec's JSON, so that a copied or updated spec never sees another's laws.
@functools.lru_cache(maxsize=16)
def _session_laws(spec_json: str) -> tuple[TokenPmf, TokenPmf]:
    spec = SessionsSpec.model_validate_json(spec_json)
    new, out = length_pmf(spec.new_tokens), length_pmf(spec.output_tokens)
    return turn_mixture(spec.turns.index_law(), new, out, spec.system_prompt_tokens)


@functools.lru_cache(maxsize=16)
def _prefix_prompt(spec_json: str) -> TokenPmf:
    spec = SharedPrefixSpec.model_validate_json(spec_json)
    return sum_of_parts([length_pmf(spec.prefix_tokens), length_pmf(spec.question_tokens)])


@functools.lru_cache(maxsize=16)
def _histogram_law(spec_json: str, kind: Literal["sessions", "shared_prefix"]) -> HistogramDist:
    pmf = _session_laws(spec_json)[0] if kind == "sessions" else _prefix_prompt(spec_json)
    return pmf.as_histogram()


# ------------------------------------------------------------------------------------------- error messages
_LAW_KINDS: dict[str, type[FrozenModel]] = {
    "fixed": FixedDist,
    "uniform": UniformDist,
    "normal": NormalDist,
    "lognormal": LognormalDist,
    "histogram": HistogramDist,
}
_NESTED: dict[str, dict[str, type[FrozenModel]]] = {
    "turns": {"fixed": FixedTurns, "uniform": UniformTurns, "geometric": GeometricTurns, "histogram": HistogramTurns},
    "think_time": {
        "fixed": FixedTime,
        "exponential": ExponentialTime,
        "lognormal": LognormalTime,
        "uniform": UniformTime,
    },
    "popularity": {"uniform": UniformPopularity, "zipf": ZipfPopularity},
    **{name: _LAW_KINDS for name in ("new_tokens", "output_tokens", "prefix_tokens", "question_tokens")},
}


def reuse_allowed_fields(loc: tuple[str | int, ...]) -> list[str] | None:
    """Field names allowed at an error location under ``sessions``, ``shared_prefix`` or ``arrival`` (None if
    the location is elsewhere)."""
    roots: dict[str, type[FrozenModel]] = {"sessions": SessionsSpec, "shared_prefix": SharedPrefixSpec}
    if loc and loc[0] == "arrival":
        return list(GammaArrival.model_fields)
    if not loc or loc[0] not in roots:
        return None
    model = roots[str(loc[0])]
    if len(loc) >= 3 and str(loc[1]) == "rate":
        model = SessionRate
    elif len(loc) >= 4 and str(loc[1]) in _NESTED:
        model = _NESTED[str(loc[1])].get(str(loc[2]), model)
    return list(model.model_fields)
