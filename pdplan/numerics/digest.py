"""A memo key for numpy arrays: a BLAKE2b digest of their exact bytes, each part prefixed by its byte length so
that no two different sequences of arrays give the same input stream (``[a, b] + [c]`` is not ``[a] + [b, c]``).
Equal arrays (same values, same dtype) give the same key; a changed value a different one, but for a hash
collision (2^-128 at 16 bytes)."""

from __future__ import annotations

import hashlib

import numpy as np
import numpy.typing as npt


def array_digest(*parts: npt.ArrayLike, digest_size: int = 16) -> bytes:
    """The digest of ``parts`` in order (module docstring); each is read as a C-contiguous array of its own dtype."""
    h = hashlib.blake2b(digest_size=digest_size)
    for part in parts:
        data = np.ascontiguousarray(part).tobytes()
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.digest()
