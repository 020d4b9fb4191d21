"""Prefix-cache mathematics: exact LRU hit-ratio curves of block traces, closed forms for sessions and shared
prefixes, multi-tier caches (``docs/prefix_cache.md``). Pure numpy/scipy; no file I/O."""
