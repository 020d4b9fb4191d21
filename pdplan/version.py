"""pdplan's version (``pdplan --version``, the reports' provenance).

The one place it is written: ``pyproject.toml`` reads it from here (``[tool.hatch.version]``), so the installed
distribution's metadata and this constant cannot differ. A literal, not ``importlib.metadata.version("pdplan")``:
that import alone costs about 40 ms, a fifth of ``pdplan --version``'s start-up (``python -X importtime``).
"""

from __future__ import annotations

VERSION = "0.1.0"
