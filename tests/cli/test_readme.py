"""Every `pdplan` command shown in README.md still runs (exit 0), in-process, from the repository root.

Output files named with `-o` go to a temporary folder; shell globs are expanded as a shell would. The README's
`my_*` files stand for the reader's own: a measurement CSV is written here from pdplan's roofline (synthetic test
data, not a measurement) and a kernel table from `pdplan calibrate` on it.
"""

from __future__ import annotations

import glob
import io
import re
import shlex
import sys
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
    shown = {stage.split()[1] for c in readme_commands() for stage in c.split(" | ")}
    assert {"optimize", "evaluate", "simulate", "transfer", "roofline", "hardware", "models", "validate"} <= shown
    assert "export" in shown


def _users_file(folder: Path, name: str) -> Path:
    """Stand-ins for the reader's files: phase times (CSV) and a kernel table fitted to them (YAML)."""
    csv_path = folder / "my_runs.csv"
    if not csv_path.exists():
        from pdplan.io.catalog import open_catalog
        from pdplan.io.kernel_tables import load_kernel_table
        from pdplan.perf.roofline import phase_time

        catalog = open_catalog()
        lines = ["gpu,model,tp,phase,batch,tokens,time_ms"]
        for phase, batch, tokens in (
            ("prefill", 1, 1024),
            ("prefill", 2, 2048),
            ("decode", 8, 1024),
            ("decode", 64, 2048),
        ):
            t = phase_time(
                catalog.model("llama-3.1-8b"),
                catalog.gpu("h100-sxm"),
                load_kernel_table("h100-sxm"),
                phase=phase,
                batch=batch,
                tokens=tokens,
            ).time_s  # type: ignore[arg-type]
            lines.append(f"h100-sxm,llama-3.1-8b,1,{phase},{batch},{tokens},{1.2e3 * float(t[()]):.4f}")
        csv_path.write_text("\n".join(lines) + "\n")
    if name.endswith(".csv"):
        return csv_path
    table = folder / "my-table.yaml"
    if not table.exists():
        assert run(["calibrate", str(csv_path), "-o", str(table), "--format", "json"]) == 0
    return table


def _stage_args(stage: str, folder: Path) -> list[str]:
    """A `pdplan ...` stage as arguments: the `my_*` files made, `-o` files put in ``folder``, globs expanded."""
    args: list[str] = []
    words = shlex.split(stage)[1:]
    for i, word in enumerate(words):
        if word.startswith("my"):
            args.append(str(_users_file(folder, word)))
        elif i > 0 and words[i - 1] in ("-o", "--output", "--plot"):
            args.append(str(folder / Path(word).name))
        elif any(ch in word for ch in "*?["):
            args.extend(sorted(glob.glob(word)))
        else:
            args.append(word)
    return args


def _marked(command: str) -> object:
    """A command that searches (``pdplan optimize``) or fits benchmark runs (``pdplan calibrate ....json``) is slow."""
    first = shlex.split(command.split(" | ")[0])
    slow = first[1] == "optimize" or (first[1] == "calibrate" and any(w.endswith(".json") for w in first))
    return pytest.param(command, marks=pytest.mark.slow) if slow else command


@pytest.mark.parametrize("command", [_marked(c) for c in readme_commands()])
def test_readme_command_runs(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each stage of `pdplan A | pdplan B` runs in turn, the next one reading the last one's stdout."""
    monkeypatch.chdir(ROOT)
    piped: str | None = None
    for stage in command.split(" | "):
        if piped is not None:
            monkeypatch.setattr(sys, "stdin", io.StringIO(piped))
        code = run(_stage_args(stage, tmp_path))
        captured = capsys.readouterr()
        assert code == 0, f"{stage!r} exited {code}: {captured.err.strip()[:300]}"
        piped = captured.out
