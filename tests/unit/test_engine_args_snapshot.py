"""tools/engine_args_snapshot.py reads argument definitions from source with ``ast`` as the engines build them at run
time: vLLM's ``get_kwargs`` rules on a config dataclass (Literal → choices, bool → ``--x/--no-x``, ``X | None`` →
``None`` accepted, ``Field`` bounds, type aliases across modules), argparse calls with choices from module
constants and defaults from class attributes, Dynamo's helper calls, click options, and records what it cannot
evaluate instead of guessing. Checked on a small synthetic package written here."""

from __future__ import annotations

import textwrap
from pathlib import Path

from engine_args.source import SourceTree
from engine_args_snapshot import snapshot

CONFIG = """
from typing import Literal
from pydantic import Field
from .aliases import CacheDType

@config
class CacheConfig:
    gpu_memory_utilization: float = Field(default=0.92, gt=0, le=1)
    cache_dtype: CacheDType = "auto"
    enable_prefix_caching: bool | None = None
    max_num_batched_tokens: int | None = None
    block_size: Literal[16, 32] | None = None
"""
ARG_UTILS = """
from vllm.config.cache import CacheConfig

class EngineArgs:
    @staticmethod
    def add_cli_args(parser):
        cache_kwargs = get_kwargs(CacheConfig)
        group = parser.add_argument_group("CacheConfig")
        group.add_argument("--gpu-memory-utilization", **cache_kwargs["gpu_memory_utilization"])
        group.add_argument("--kv-cache-dtype", **cache_kwargs["cache_dtype"])
        group.add_argument("--enable-prefix-caching", **{**cache_kwargs["enable_prefix_caching"], "default": None})
        group.add_argument("--max-num-batched-tokens", **cache_kwargs["max_num_batched_tokens"])
        group.add_argument("--block-size", **cache_kwargs["block_size"])
        group.add_argument("--data-parallel-rank", "-dpn", type=int, help="x")
        group.add_argument("--plugin", choices=load_plugins(), default="a")

class AsyncEngineArgs(EngineArgs):
    @staticmethod
    def add_cli_args(parser, async_args_only=False):
        parser.add_argument("--enable-log-requests", action=argparse.BooleanOptionalAction, default=False)
"""
CLI_ARGS = """
from vllm.config import config

def make_arg_parser(parser):
    parser.add_argument("--headless", action="store_true", default=False)

@config
class BaseFrontendArgs:
    lora_modules: list[str] | None = None

    @classmethod
    def _customize_cli_kwargs(cls, frontend_kwargs):
        frontend_kwargs["lora_modules"]["type"] = optional_type(str)
        return frontend_kwargs

@config
class FrontendArgs(BaseFrontendArgs):
    host: str | None = None
    port: int = 8000
"""


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def test_vllm_style_arguments_are_read_as_vllm_builds_them(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "vllm/__init__.py": "",
            "vllm/config/__init__.py": "",
            "vllm/config/aliases.py": 'CacheDType = Literal["auto", "fp8", "bfloat16"]\n',
            "vllm/config/cache.py": CONFIG,
            "vllm/engine/__init__.py": "",
            "vllm/engine/arg_utils.py": ARG_UTILS,
            "vllm/entrypoints/__init__.py": "",
            "vllm/entrypoints/openai/__init__.py": "",
            "vllm/entrypoints/openai/cli_args.py": CLI_ARGS,
        },
    )
    doc = snapshot("vllm", tmp_path, "0.0.1", "test (PyPI)")
    engine = doc["groups"]["engine"]["flags"]
    assert engine["--gpu-memory-utilization"]["constraints"] == {"gt": 0, "le": 1}
    assert engine["--gpu-memory-utilization"]["default"] == 0.92
    assert engine["--kv-cache-dtype"]["choices"] == ["auto", "bfloat16", "fp8"]  # the alias, sorted as vLLM does
    assert engine["--enable-prefix-caching"]["action"] == "boolean_optional"
    assert engine["--enable-prefix-caching"]["default"] is None  # the literal override
    assert engine["--max-num-batched-tokens"]["type"] == "human_int"
    assert engine["--max-num-batched-tokens"]["none_allowed"]
    assert engine["--block-size"]["choices"] == [16, 32, "None"]
    assert engine["--data-parallel-rank"]["names"] == ["--data-parallel-rank", "-dpn"]
    assert engine["--plugin"]["choices"] == {"unresolved": "load_plugins()"}  # computed at run time: not guessed
    assert engine["--enable-log-requests"]["action"] == "boolean_optional"
    server = doc["groups"]["openai_server"]["flags"]
    assert server["--port"]["default"] == 8000
    assert server["--headless"]["type"] == "bool"
    assert server["--lora-modules"]["none_allowed"]  # _customize_cli_kwargs replayed: optional_type(str)
    assert doc["source"]["files_read"][0].startswith("vllm/")


def test_argparse_dynamo_and_click_definitions(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "srv/__init__.py": "",
            "srv/args.py": """
                MODES = ["null", "prefill", "decode"]
                class Mode(Enum):
                    AGG = "agg"
                    PREFILL = "prefill"
                class ServerArgs:
                    tp_size: int = 1
                    @staticmethod
                    def add_cli_args(parser):
                        parser.add_argument("--tp-size", "--tensor-parallel-size", type=int, default=ServerArgs.tp_size)
                        parser.add_argument("--disaggregation-mode", choices=MODES, default="null")
                        add_argument(g, flag_name="--worker-mode", env_var="X", default=None, help="h",
                                     choices=[m.value for m in Mode])
                        add_negatable_bool_argument(g, flag_name="--use-x", env_var="Y", default=False, help="h")
                import click
                @click.command("serve")
                @click.option("--backend", type=ChoiceWithAlias(["pytorch", "tensorrt"], {"trt": "tensorrt"}))
                @click.option("--trust_remote_code", is_flag=True, default=False)
                @click.option("--config", "--extra_llm_api_options", "extra_llm_api_options", type=str)
                def serve(**kwargs):
                    ...
            """,
        },
    )
    from engine_args.argparse_calls import collect, function
    from engine_args.click_pass import click_options

    tree = SourceTree(tmp_path)
    module = tree.module("srv.args")
    assert module is not None
    flags = collect(tree, module, function(module, "ServerArgs.add_cli_args")).flags
    assert flags["--tp-size"]["default"] == 1
    assert flags["--disaggregation-mode"]["choices"] == ["decode", "null", "prefill"]
    assert flags["--worker-mode"]["choices"] == ["agg", "prefill"]
    assert flags["--use-x"]["action"] == "boolean_optional"
    options = click_options(tree, module, "serve").flags
    assert options["--backend"]["choices"] == ["pytorch", "tensorrt", "trt"]
    assert options["--trust_remote_code"]["action"] == "store_true"
    assert options["--config"]["dest"] == "extra_llm_api_options"


SLURM_OPT = """
static slurm_cli_opt_t slurm_opt__unknown_ = {
	.name = NULL,
	.has_arg = no_argument,
	.val = '?',
	.set_func_srun = arg_set__unknown_srun,
};
static slurm_cli_opt_t slurm_opt_nodes = {
	.name = "nodes",
	.has_arg = required_argument,
	.val = 'N',
	.set_func = arg_set_nodes,
	.reset_each_pass = true,
};
static slurm_cli_opt_t slurm_opt_epilog = {
	.name = "epilog",
	.has_arg = required_argument,
	.val = LONG_OPT_EPILOG,
	.set_func_srun = arg_set_epilog,
};
static slurm_cli_opt_t slurm_opt_overlap = {
	.name = "overlap",
	.has_arg = optional_argument,
	.val = LONG_OPT_OVERLAP,
	.set_func_srun = arg_set_overlap,
};
static slurm_cli_opt_t slurm_opt_array = {
	.name = "array",
	.has_arg = required_argument,
	.val = 'a',
	.set_func_sbatch = arg_set_array,
};
static slurm_cli_opt_t slurm_opt_unlisted = {
	.name = "unlisted",
	.has_arg = no_argument,
	.val = LONG_OPT_UNLISTED,
	.set_func = arg_set_unlisted,
};
static const slurm_cli_opt_t *common_options[] = {
	&slurm_opt__unknown_,
	&slurm_opt_array,
	&slurm_opt_epilog,
	&slurm_opt_nodes,
	&slurm_opt_overlap,
	NULL
};
"""


def test_srun_options_are_the_listed_records_srun_sets(tmp_path: Path) -> None:
    """Slurm's option records (``src/common/slurm_opt.c``): srun takes those in ``common_options[]`` with a
    ``.set_func`` or ``.set_func_srun`` and a name; a char ``.val`` is also the short option; ``optional_argument``
    takes ``[=value]``. Not srun's: ``--array`` (sbatch only), ``--unlisted`` (not in the table), the nameless
    record (an environment variable only)."""
    (tmp_path / "src" / "common").mkdir(parents=True)
    (tmp_path / "src" / "common" / "slurm_opt.c").write_text(SLURM_OPT)
    doc = snapshot("srun", tmp_path, "25.11.7", "test")
    flags = doc["groups"]["srun"]["flags"]
    assert sorted(flags) == ["--epilog", "--nodes", "--overlap"]
    assert flags["--nodes"]["names"] == ["--nodes", "-N"]
    assert (flags["--nodes"]["action"], flags["--nodes"]["type"], flags["--nodes"]["nargs"]) == ("store", "str", None)
    assert flags["--epilog"]["names"] == ["--epilog"]
    assert flags["--overlap"]["nargs"] == "?"
    assert doc["source"]["files_read"] == ["src/common/slurm_opt.c"]
