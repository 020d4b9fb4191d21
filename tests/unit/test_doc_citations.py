"""Every citation of a design document resolves inside the repository (docs/README.md, "Citing a section").

A citation is ``docs/<name>.md §N`` or ``docs/<name>.md §N.M``, optionally followed by more sections
(``docs/queueing.md §1, §2, §5.2``, ``§1.2–1.3``); text after the number (``§1.2(1)``) is not part of it, and only
the leading ``N`` / ``N.M`` of a deeper number counts. The cited document must exist and carry the heading
``## N. Title`` (a section) or ``### N.M Title`` (a subsection). Design references outside the repository
(``../shared``) and the legacy citation forms they used must not appear in what a clone reads: the package, the docs,
the README, the examples and the hardware catalogue.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("pdplan", "docs", "README.md", "benchmarks", "tests", "examples", "hardware_db", "pyproject.toml")
"""Where citations are looked for (files under folders, or single files)."""
SHIPPED = ("pdplan", "docs", "README.md", "examples", "hardware_db")
"""What a user's clone reads: no reference outside the repository, no legacy citation."""
SUFFIXES = {".py", ".yaml", ".yml", ".md", ".json", ".csv", ".sh", ".txt", ".toml"}
SKIPPED_DIRS = {".venv", "__pycache__", ".hypothesis", ".pytest_cache", ".mypy_cache", ".ruff_cache"}

CITATION = re.compile(
    r"docs/(?P<doc>[A-Za-z0-9_-]+)\.md`?[\s#\"'*]{0,40}?"  # the document; a line break or comment leader may follow
    r"(?P<refs>§\s?\d+(?:\.\d+)*"  # the first section
    r"(?:\s*(?:,|;|and|or|to|–|-)\s*§\s?\d+(?:\.\d+)*"  # more sections: ", §2", " and §3", "–§5"
    r"|[–-]\d+(?:\.\d+)*)*)"  # a range without a second §: "§1.2–1.3"
)
NUMBER = re.compile(r"\d+(?:\.\d+)*")
SECTION_HEADING = re.compile(r"## (\d+)\. \S")
SUBSECTION_HEADING = re.compile(r"### (\d+)\.(\d+) \S")
SHARED_PATH = re.compile(r"(?:\.\./|/work/)shared\b")
LEGACY = re.compile(
    r"\b(?:QUEUEING|ENGINES|ARCHITECTURE)(?:\.md)?\s*§"  # QUEUEING §1.2, QUEUEING.md §1.2, ENGINES.md §3 ...
    r"|\b(?:QUEUEING|ENGINES|ARCHITECTURE|STYLE)\.md\b"  # a design file named without a section
    r"|PUBLISHED_RESULTS|MISSION_FEATURES|HARDWARE_FACTS"
)


def citations(text: str) -> Iterator[tuple[str, str, int]]:
    """``(document name, section, line number)`` for every section cited in ``text``; the section is the leading
    ``N`` or ``N.M`` of the cited number (``§4.5.1`` cites ``4.5``)."""
    text = text.replace("\\u00a7", "§")  # JSON written with ensure_ascii
    for match in CITATION.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        for number in NUMBER.findall(match["refs"]):
            yield match["doc"], ".".join(number.split(".")[:2]), line


def headings(markdown: str) -> set[str]:
    """The section numbers a document's headings define (``"2"`` for ``## 2. Title``, ``"2.3"`` for ``### 2.3 Title``),
    outside fenced code blocks."""
    found: set[str] = set()
    fenced = False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        if section := SECTION_HEADING.match(line):
            found.add(section[1])
        elif subsection := SUBSECTION_HEADING.match(line):
            found.add(f"{subsection[1]}.{subsection[2]}")
    return found


def unresolved(text: str, docs_dir: Path, where: str) -> list[str]:
    """One message per citation in ``text`` whose document or heading is missing under ``docs_dir``."""
    problems: list[str] = []
    cache: dict[str, set[str] | None] = {}
    for doc, section, line in citations(text):
        if doc not in cache:
            path = docs_dir / f"{doc}.md"
            cache[doc] = headings(path.read_text(encoding="utf-8")) if path.is_file() else None
        defined = cache[doc]
        if defined is None:
            problems.append(f"{where}:{line}: docs/{doc}.md §{section}: no such document")
        elif section not in defined:
            problems.append(f"{where}:{line}: docs/{doc}.md §{section}: no heading for this section")
    return problems


def _files(roots: tuple[str, ...]) -> Iterator[Path]:
    this = Path(__file__).resolve()
    for root in roots:
        path = ROOT / root
        candidates = [path] if path.is_file() else sorted(path.rglob("*"))
        for file in candidates:
            if (
                file.is_file()
                and file.suffix in SUFFIXES
                and file.resolve() != this
                and not SKIPPED_DIRS.intersection(file.relative_to(ROOT).parts)
            ):
                yield file


def _text(file: Path) -> str:
    return file.read_text(encoding="utf-8", errors="replace")


def _matches(pattern: re.Pattern[str], roots: tuple[str, ...]) -> list[str]:
    found = []
    for file in _files(roots):
        text = _text(file)
        for match in pattern.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append(f"{file.relative_to(ROOT)}:{line}: {match[0]!r}")
    return found


# --- the parser, on synthetic text --------------------------------------------------------------------------------

DOC = """# A document

## 1. First
### 1.2 A subsection
## 2. Second

```
## 9. Not a heading: inside a code block
```
"""


@pytest.fixture
def docs_dir(tmp_path: Path) -> Path:
    (tmp_path / "guide.md").write_text(DOC, encoding="utf-8")
    return tmp_path


def test_parser_reads_every_form_of_citation() -> None:
    text = (
        "see docs/guide.md §1.2(1) and docs/guide.md §1, §2, §4.5.1;\n"
        "a wrapped one: docs/guide.md\n    # §2.\n"
        "`docs/guide.md` §1.2–1.3, docs/guide.md §1–§2 and docs/guide.md \\u00a72"
    )
    assert list(citations(text)) == [
        ("guide", "1.2", 1),
        ("guide", "1", 1),
        ("guide", "2", 1),
        ("guide", "4.5", 1),
        ("guide", "2", 2),
        ("guide", "1.2", 4),
        ("guide", "1.3", 4),
        ("guide", "1", 4),
        ("guide", "2", 4),
        ("guide", "2", 4),
    ]
    assert list(citations("docs/guide.md without a section, § 3 elsewhere; docs/other.txt §1")) == []


def test_headings_follow_the_convention() -> None:
    assert headings(DOC) == {"1", "1.2", "2"}
    assert headings("## 3 No dot\n### 3.1. Extra dot\n#### 3.1.1 Too deep\n") == set()


def test_resolved_citations_pass(docs_dir: Path) -> None:
    assert unresolved("docs/guide.md §1, §1.2 and docs/guide.md §2.", docs_dir, "x") == []


def test_missing_sections_and_documents_are_caught(docs_dir: Path) -> None:
    text = "docs/guide.md §1.3, docs/guide.md §9 (only in a code block), docs/guide.md §3\ndocs/nowhere.md §1"
    assert unresolved(text, docs_dir, "x.py") == [
        "x.py:1: docs/guide.md §1.3: no heading for this section",
        "x.py:1: docs/guide.md §9: no heading for this section",
        "x.py:1: docs/guide.md §3: no heading for this section",
        "x.py:2: docs/nowhere.md §1: no such document",
    ]


def test_legacy_patterns_are_recognised() -> None:
    legacy = "QUEUEING §1.2 · QUEUEING.md §2 · ENGINES.md §3 4.1 · ARCHITECTURE\n    §4 · PUBLISHED_RESULTS · STYLE.md"
    assert len(LEGACY.findall(legacy)) == 6
    assert LEGACY.search("docs/queueing.md §1.2, docs/engines.md §3.1, docs/architecture.md §4") is None
    assert SHARED_PATH.search("../shared/calibration/x.csv") is not None


# --- the repository ------------------------------------------------------------------------------------------------


def test_every_citation_resolves() -> None:
    problems: list[str] = []
    seen = 0
    for file in _files(SCANNED):
        text = _text(file)
        seen += sum(1 for _ in citations(text))
        problems += unresolved(text, ROOT / "docs", str(file.relative_to(ROOT)))
    assert seen > 0, "no citation found: the scan is broken"
    assert not problems, "unresolved citations:\n" + "\n".join(problems)


def test_no_reference_outside_the_repository() -> None:
    found = _matches(SHARED_PATH, SHIPPED)
    assert not found, "paths outside the repository:\n" + "\n".join(found)


def test_no_legacy_citation() -> None:
    found = _matches(LEGACY, SHIPPED)
    assert not found, "legacy citations:\n" + "\n".join(found)
