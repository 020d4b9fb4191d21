"""pdplan: capacity planning for prefill/decode-disaggregated LLM serving.

The library API (a notebook user's entry points) is re-exported here as it grows; the ``pdplan`` command
line is a thin view over it.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("pdplan")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+source"

__all__ = ["__version__"]
