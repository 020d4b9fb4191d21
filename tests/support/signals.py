"""Children that a Ctrl-C test interrupts start with SIGINT at its default action."""

from __future__ import annotations

import signal


def default_sigint() -> None:
    """``preexec_fn`` for a child the test sends SIGINT: a shell's background job (``cmd &``, as a CI runner or
    ``nohup`` may start the suite) runs with SIGINT ignored, its children inherit that, and Python then installs no
    KeyboardInterrupt handler, so the interrupted command would run to its end and exit 0."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
