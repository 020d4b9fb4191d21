"""The block of a benchmark's output inside a document, between ``<!-- BEGIN name -->`` and ``<!-- END name -->``
markers: rewritten in place, the rest of the document untouched (used by ``mlperf_server.py`` and
``vllm_open_loop.py``)."""

from __future__ import annotations

from pathlib import Path


def write_block(doc_path: Path, section: str, text: str) -> None:
    """Replace the text between ``section``'s markers in ``doc_path`` by ``text`` (which ends with a newline); exit
    with the file and the missing markers named where they are not there."""
    begin, end = f"<!-- BEGIN {section} -->", f"<!-- END {section} -->"
    doc = doc_path.read_text(encoding="utf-8")
    if begin not in doc or end not in doc:
        raise SystemExit(f"{doc_path} has no {begin} ... {end} block")
    head, rest = doc.split(begin, 1)
    doc_path.write_text(f"{head}{begin}\n{text}{end}{rest.split(end, 1)[1]}", encoding="utf-8")
