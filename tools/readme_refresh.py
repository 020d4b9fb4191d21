"""Re-run README.md ```text blocks that open with `$ pdplan ...` and replace each block's lines with what the command
prints now on a 100-column terminal (a pty: stderr and stdout as a reader sees them, colour off, progress lines
dropped). tests/cli/test_readme.py compares every such block with the command's output; after a change it names the
block to refresh.

Usage: python tools/readme_refresh.py "pdplan optimize --top 3" ["pdplan ..." ...]   (from the repository root)

The whole block is replaced: restore by hand the `...` elisions and `(...)` truncations of blocks that show an
excerpt (the test's docstring says what they may stand for). Needs `script` (util-linux).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path("README.md")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def printed(command: str) -> str:
    """What ``command`` prints in a 100-column pty, trailing spaces and progress lines removed."""
    env = {**os.environ, "COLUMNS": "100", "LINES": "50", "NO_COLOR": "1", "TERM": "dumb"}
    out = subprocess.run(["script", "-qec", command, "/dev/null"], capture_output=True, text=True, env=env).stdout
    out = ANSI.sub("", out).replace("\r", "")
    return "\n".join(line.rstrip() for line in out.splitlines() if not line.startswith("progress: ")).strip() + "\n"


def main(commands: list[str]) -> None:
    text = README.read_text()
    for command in commands:
        head = f"```text\n$ {command}\n"
        start = text.index(head) + len(head)
        end = text.index("```", start)
        text = text[:start] + printed(command) + text[end:]
    README.write_text(text)


if __name__ == "__main__":
    main(sys.argv[1:])
