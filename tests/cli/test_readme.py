"""Every `pdplan` command shown in README.md still runs (exit 0), in-process, from the repository root.

Output files named with `-o` go to a temporary folder; shell globs are expanded as a shell would.
"""

from __future__ import annotations

import glob
import re
import shlex
from pathlib import Path

import pytest

from pdplan.cli import run

ROOT = Path(__file__).resolve().parents[2]


def readme_commands() -> list[str]:
    """`pdplan ...` command lines from the README's bash blocks (the part after `&&` in the Quickstart)."""
    text = (ROOT / "README.md").read_text()
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            line = line.split("#")[0].strip()
            if "&&" in line:
                line = line.split("&&")[-1].strip()
            if line.startswith("pdplan "):
                commands.append(line)
    return commands


def test_the_readme_has_commands_for_every_pdplan_command() -> None:
    shown = {c.split()[1] for c in readme_commands()}
    assert {"optimize", "evaluate", "simulate", "transfer", "roofline", "hardware", "models", "validate"} <= shown


@pytest.mark.parametrize("command", readme_commands())
def test_readme_command_runs(command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(ROOT)
    args: list[str] = []
    words = shlex.split(command)[1:]
    for i, word in enumerate(words):
        if i > 0 and words[i - 1] in ("-o", "--output", "--plot"):
            args.append(str(tmp_path / Path(word).name))
        elif any(ch in word for ch in "*?["):
            args.extend(sorted(glob.glob(word)))
        else:
            args.append(word)
    code = run(args)
    captured = capsys.readouterr()
    assert code == 0, f"{command!r} exited {code}: {captured.err.strip()[:300]}"
