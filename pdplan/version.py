"""The installed distribution's version (``pdplan --version``, the reports' provenance)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    VERSION = version("pdplan")
except PackageNotFoundError:  # running from a source tree that was never installed
    VERSION = "0.0.0+source"
