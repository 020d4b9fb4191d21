"""The options ``srun`` accepts, read from Slurm's C source (``src/common/slurm_opt.c``) with regular expressions over
its option records; nothing is compiled or run.

Each option is a ``static slurm_cli_opt_t slurm_opt_NAME = { .name = "...", .has_arg = ..., .val = ..., ... };``
record, and ``common_options[]`` lists the records the commands share. ``slurm_option_table_create`` (same file)
gives a command the records whose ``.set_func`` is set, plus, for ``srun``, those whose ``.set_func_srun`` is set; a
record without a ``.name`` exists only as an environment variable. ``.has_arg``: ``no_argument`` (a switch),
``required_argument`` (takes a value), ``optional_argument`` (``--name[=value]``); ``.val`` a character literal is
also the short option ``-c``. Values are strings to the option table (Slurm converts them in each ``arg_set_*``
function), so every record has type ``str`` and no choices: a wrong value is not caught here, a wrong name is.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

RECORD = re.compile(r"static slurm_cli_opt_t (slurm_opt_\w+) = \{(.*?)\};", re.DOTALL)
FIELD = re.compile(r"\.(\w+)\s*=\s*([^,\n]+),")
TABLE = re.compile(r"common_options\[\]\s*=\s*\{(.*?)\};", re.DOTALL)
ACTION = {"no_argument": "store_true", "required_argument": "store", "optional_argument": "store"}
FILE = "src/common/slurm_opt.c"


def srun_options(root: Path) -> dict[str, dict[str, Any]]:
    """``srun``'s options in the snapshot's record form (names, action, nargs, type, ...), keyed by long name."""
    text = (root / FILE).read_text()
    table = TABLE.search(text)
    if table is None:
        raise SystemExit(f"no common_options[] table in {root / FILE}")
    listed = set(re.findall(r"&(slurm_opt_\w+)", table.group(1)))
    out: dict[str, dict[str, Any]] = {}
    for ident, body in RECORD.findall(text):
        fields = {key: value.strip() for key, value in FIELD.findall(body + ",")}
        quoted = re.fullmatch(r'"([^"]+)"', fields.get("name", ""))
        if ident not in listed or quoted is None or not ({"set_func", "set_func_srun"} & set(fields)):
            continue  # not srun's, or (.name = NULL) only an environment variable
        name = f"--{quoted.group(1)}"
        names = [name]
        short = re.fullmatch(r"'(.)'", fields.get("val", ""))
        if short is not None and short.group(1) != "?":
            names.append(f"-{short.group(1)}")
        has_arg = fields.get("has_arg", "no_argument")
        out[name] = {
            "names": names,
            "action": ACTION[has_arg],
            "nargs": "?" if has_arg == "optional_argument" else None,
            "choices": None,
            "none_allowed": False,
            "type": "str",
            "default": None,
            "dest": quoted.group(1).replace("-", "_"),
            "file": FILE,
        }
    return out
