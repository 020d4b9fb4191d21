"""Every `pdplan` command shown in README.md still runs (exit 0), in-process, from the repository root, and every
output the README shows is what the command prints now.

Output files named with `-o` go to a temporary folder; shell globs are expanded as a shell would. The README's
`my_*` files stand for the reader's own: a measurement CSV is written here from pdplan's roofline (synthetic test
data, not a measurement) and a kernel table from `pdplan calibrate` on it.

A ```text block that opens with `$ pdplan ...` shows that command's output as a 100-column terminal prints it
(stderr, then stdout). Each shown line must equal a printed line after collapsing runs of spaces; the lines between
two `...` lines (alone, or as `...  # what it stands for`, or `role)  ...`) must be consecutive printed lines, in
order; a line ending in `(...)` shows the start of its printed line. So every figure shown is compared exactly, and a
block is refreshed with `python tools/readme_refresh.py "pdplan ..."` (then its elisions restored by hand).
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


def readme_outputs() -> list[tuple[str, list[str]]]:
    """(command, the lines shown below it) of each ```text block that opens with `$ pdplan ...`."""
    text = (ROOT / "README.md").read_text()
    shown = []
    for block in re.findall(r"```text\n(.*?)```", text, flags=re.S):
        lines = block.splitlines()
        if lines and lines[0].startswith("$ pdplan "):
            shown.append((lines[0][2:], lines[1:]))
    return shown


ELISION = re.compile(r"^\s*(?:\S+\)\s+)?\.\.\.(?:\s+#.*)?$")
"""A shown line that stands for printed lines left out: `...`, `...  # what they are`, `decode)  ...  # ...`."""


def _same(shown: str, printed: str) -> bool:
    """Equal after collapsing whitespace; a shown line ending in `(...)` is the start of the printed one."""
    want, got = " ".join(shown.split()), " ".join(printed.split())
    if want.endswith("(...)"):
        return got.startswith(want[: -len("(...)")].rstrip())
    return want == got


def _agree(run: list[str], printed: list[str]) -> int:
    """How many leading lines of ``run`` equal the printed lines they face."""
    return next(
        (k for k, (a, b) in enumerate(zip(run, printed, strict=False)) if not _same(a, b)), min(len(run), len(printed))
    )


def unmatched(shown: list[str], printed: list[str]) -> str | None:
    """The first shown line not printed where the block puts it (module docstring), or None when all are."""
    runs: list[list[str]] = [[]]
    for line in shown:
        if ELISION.match(line):
            runs.append([])
        else:
            runs[-1].append(line)
    at = 0
    for lines in (r for r in runs if r):
        starts = [i for i in range(at, len(printed) - len(lines) + 1) if _same(lines[0], printed[i])]
        found = next((i for i in starts if all(map(_same, lines, printed[i : i + len(lines)]))), None)
        if found is None:
            return lines[max((_agree(lines, printed[i:]) for i in starts), default=0)]
        at = found + len(lines)
    return None


def test_every_output_block_names_its_command() -> None:
    """Output is shown only in ```text blocks that open with `$ pdplan ...` (compared below); no bare ``` blocks."""
    text = (ROOT / "README.md").read_text()
    fences = re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.S | re.M)
    assert {lang for lang, _ in fences} <= {"bash", "text", "yaml", "python"}
    assert all(body.startswith("$ pdplan ") for lang, body in fences if lang == "text")
    assert len(readme_outputs()) == sum(lang == "text" for lang, _ in fences) >= 9


def test_the_matcher_fails_on_a_changed_figure() -> None:
    printed = ["head", "│ step_s │ 0.869 ms ± 0.14 ms │", "│ runs │ 9 │", "tail"]
    assert unmatched(["│ step_s   │ 0.869 ms ± 0.14 ms │", "│ runs │ 9 │"], printed) is None
    assert unmatched(["│ step_s │ 0.971 ms ± 0.14 ms │"], printed) == "│ step_s │ 0.971 ms ± 0.14 ms │"
    assert unmatched(["│ runs │ 9 │", "│ step_s │ 0.869 ms ± 0.14 ms │"], printed) == "│ step_s │ 0.869 ms ± 0.14 ms │"
    assert unmatched(["head", "...", "tail"], printed) is None
    assert unmatched(["head", "tail"], printed) == "tail"  # not consecutive without `...`
    assert unmatched(["he(...)", "  ...  # the rest"], printed) is None


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


def _stage_args(stage: str, folder: Path, moved: dict[str, str] | None = None) -> list[str]:
    """A `pdplan ...` stage as arguments: the `my_*` files made, `-o` files put in ``folder`` (``moved`` records
    each new path with the README's), globs expanded."""
    args: list[str] = []
    words = shlex.split(stage)[1:]
    for i, word in enumerate(words):
        if word.startswith("my"):
            args.append(str(_users_file(folder, word)))
        elif i > 0 and words[i - 1] in ("-o", "--output", "--plot"):
            args.append(str(folder / Path(word).name))
            if moved is not None:
                moved[args[-1]] = word
        elif any(ch in word for ch in "*?["):
            args.extend(sorted(glob.glob(word)))
        else:
            args.append(word)
    return args


def _marked(command: str, *shown: list[str]) -> object:
    """A command that searches (``pdplan optimize``) or fits benchmark runs (``pdplan calibrate ....json``) is slow."""
    first = shlex.split(command.split(" | ")[0])
    slow = first[1] == "optimize" or (first[1] == "calibrate" and any(w.endswith(".json") for w in first))
    return pytest.param(command, *shown, marks=pytest.mark.slow) if slow else pytest.param(command, *shown)


def commands_without_output() -> list[str]:
    """The README's commands that no ```text block shows the output of: a command whose output is shown is run, and
    its exit status checked, by ``test_readme_output_is_what_pdplan_prints`` (a second run here would only repeat it;
    the vLLM benchmark fit alone costs about 12 s of CPU)."""
    shown = {command for command, _ in readme_outputs()}
    return [c for c in readme_commands() if c not in shown]


@pytest.mark.parametrize("command", [_marked(c) for c in commands_without_output()])
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


def readme_python_blocks() -> list[str]:
    """The README's ```python blocks (the library examples)."""
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)


def test_the_readme_has_a_library_example() -> None:
    assert readme_python_blocks(), "README.md shows no ```python block: remove this test with the example"


@pytest.mark.parametrize("block", readme_python_blocks())
def test_readme_python_block_runs(
    block: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each library example runs as shown from the repository root (issue #25 item 7: every command in the README
    is executed by a test) and prints one line per ``print`` call, none of them empty."""
    monkeypatch.chdir(ROOT)
    exec(compile(block, "README.md python block", "exec"), {"__name__": "readme_example"})
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == block.count("print("), printed
    assert all(line.strip() for line in printed), printed


def _printed(command: str, folder: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """What `pdplan A | pdplan B` prints on a 100-column terminal: every stage's stderr, then the last one's stdout
    (progress lines dropped, `-o` paths as the README gives them)."""
    moved: dict[str, str] = {}
    piped: str | None = None
    errors = ""
    for stage in command.split(" | "):
        if piped is not None:
            sys.stdin = io.StringIO(piped)
        code = run(_stage_args(stage, folder, moved))
        captured = capsys.readouterr()
        assert code == 0, f"{stage!r} exited {code}: {captured.err.strip()[:300]}"
        piped, errors = captured.out, errors + captured.err
    text = errors + (piped or "")
    for new, old in moved.items():
        text = text.replace(new, old)
    return [line.rstrip() for line in text.splitlines() if not line.startswith("progress: ")]


@pytest.mark.parametrize(("command", "shown"), [_marked(c, s) for c, s in readme_outputs()])
def test_readme_output_is_what_pdplan_prints(
    command: str,
    shown: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from pdplan.cli.common import stdout_console

    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "stdin", sys.stdin)
    monkeypatch.setattr(stdout_console, "width", 100)
    monkeypatch.setenv("COLUMNS", "100")
    printed = _printed(command, tmp_path, capsys)
    line = unmatched(shown, printed)
    assert line is None, (
        f"README shows {line!r} for `{command}`, which now prints:\n" + "\n".join(printed) + "\n(refresh the block: "
        f'python tools/readme_refresh.py "{command}")'
    )
