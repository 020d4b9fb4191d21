"""The pdplan error family, mapped to exit codes in one place (:func:`exit_code_for`).

Expected outcomes are not crashes (the aiconfigurator ``NoResultsError`` idea):

* :class:`SpecError` and its children: bad input from a user (file, field, flag). Exit code 2.
* :class:`NoFeasiblePlanError`: the inputs are fine but no deployment meets the constraints.
  Exit code 3; the message names the binding constraint.
* Anything else escaping the library is a genuine bug: exit code 1 with a traceback.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

EXIT_OK = 0
EXIT_BUG = 1
EXIT_BAD_INPUT = 2
EXIT_INFEASIBLE = 3


class PdplanError(Exception):
    """Base class of every error pdplan raises on purpose."""

    exit_code: int = EXIT_BUG


class SpecError(PdplanError, ValueError):
    """Bad user input. ``str(err)`` is one line: where, which field, what is wrong, what is allowed."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, message: str, *, source: str | None = None, field: str | None = None):
        self.source = source
        self.field = field
        where = ": ".join(part for part in (source, field) if part)
        one_line = " ".join(message.split())
        super().__init__(f"{where}: {one_line}" if where else one_line)


class UnitError(SpecError):
    """A quantity string that the unit parser cannot read (see :mod:`pdplan.units`)."""


class UnknownNameError(SpecError):
    """A catalogue name that does not exist; the message suggests the closest valid names."""

    def __init__(self, kind: str, name: str, valid: Iterable[str], *, source: str | None = None):
        valid_sorted = sorted(valid)
        close = difflib.get_close_matches(name.lower(), valid_sorted, n=3, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}?" if close else f"valid: {', '.join(valid_sorted)}"
        super().__init__(f"unknown {kind} {name!r}; {hint}", source=source)
        self.kind = kind
        self.name = name
        self.suggestions = close


class NoFeasiblePlanError(PdplanError):
    """No deployment meets the constraints. ``binding_constraint`` says which one bound first."""

    exit_code = EXIT_INFEASIBLE

    def __init__(self, message: str, *, binding_constraint: str, closest: object | None = None):
        super().__init__(" ".join(message.split()))
        self.binding_constraint = binding_constraint
        self.closest = closest


class UnsettledWaitError(NoFeasiblePlanError):
    """A queue whose stationary law cannot be trusted at the rate asked (the KV link's tandem chain mixes too
    slowly near saturation to converge within its iteration budget). The goodput search counts such rates as
    missing the SLO; at a rate the user asks for it is an error (exit 3): the wait there is not computable, so
    no latency is reported."""

    def __init__(self, message: str, *, rate_index: int | None = None):
        super().__init__(message, binding_constraint="link")
        self.rate_index = rate_index  # which of the rates asked failed first (rates before it settled)


def exit_code_for(err: BaseException) -> int:
    """Exit code for an exception reaching the CLI: 2 bad input, 3 infeasible, 1 a bug."""
    if isinstance(err, PdplanError):
        return err.exit_code
    return EXIT_BUG
