"""Every command is a view of the library: `pdplan CMD ... --format json` prints exactly the document that the library
call plus the `pdplan.report` builder give for the same inputs (no typer involved on the library side).

`optimize` without overrides is covered in test_optimize_cli.py (every example); here it runs with the shared overrides.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pdplan.cli import run
from pdplan.io.catalog import open_catalog
from pdplan.io.overrides import apply_overrides
from pdplan.io.scenario import load_scenario
from pdplan.report.render import View, to_json
from pdplan.specs.command_line import ScenarioOverrides

ROOT = Path(__file__).resolve().parents[2]
SMALL = ROOT / "tests" / "data" / "small_scenario.yaml"
DEFAULT = ROOT / "examples" / "default.yaml"
MEASUREMENTS = (
    "gpu,model,tp,phase,batch,tokens,time_ms\n"
    "h100-sxm,llama-3.1-8b,1,prefill,1,2048,70\n"
    "h100-sxm,llama-3.1-8b,1,prefill,4,1024,140\n"
    "h100-sxm,llama-3.1-8b,1,decode,1,1024,7.5\n"
    "h100-sxm,llama-3.1-8b,1,decode,64,1024,12\n"
)


def cli_json(capsys: pytest.CaptureFixture[str], *argv: str | Path, code: int = 0) -> Any:
    """The JSON a command prints (its exit code checked)."""
    capsys.readouterr()
    assert run([*(str(a) for a in argv), "--format", "json"]) == code, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def library_json(view: View | Any) -> Any:
    """A view's JSON document (or a plain document) as the CLI prints it, parsed back."""
    return json.loads(to_json(view.document if isinstance(view, View) else view))


@pytest.mark.parametrize("kind", ["gpus", "links"])
def test_hardware_list(kind: str, capsys: pytest.CaptureFixture[str]) -> None:
    from pdplan.report.catalog import gpus_view, links_view

    catalog = open_catalog()
    if kind == "gpus":
        view = gpus_view([catalog.gpu(n) for n in catalog.names("gpu")])
    else:
        view = links_view([catalog.link(n) for n in catalog.names("link")])
    assert cli_json(capsys, "hardware", "list", "--kind", kind) == library_json(view)


@pytest.mark.parametrize("name", ["h100-sxm", "ib-ndr", "hardware_db/links/roce-400g.yaml"])
def test_hardware_show(name: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from pdplan.report.catalog import hardware_show_view

    monkeypatch.chdir(ROOT)
    catalog = open_catalog()
    spec = catalog.gpu(name) if name == "h100-sxm" else catalog.link(name)
    assert cli_json(capsys, "hardware", "show", name) == library_json(hardware_show_view(spec))


def test_models_list(capsys: pytest.CaptureFixture[str]) -> None:
    from pdplan.report.catalog import models_list_view

    catalog = open_catalog()
    view = models_list_view([catalog.model(n) for n in catalog.names("model")])
    assert cli_json(capsys, "models", "list") == library_json(view)


@pytest.mark.parametrize("name", ["deepseek-v3", "qwen3-next-80b-a3b"])
def test_models_show(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    from pdplan.report.catalog import model_show_view

    assert cli_json(capsys, "models", "show", name) == library_json(model_show_view(open_catalog().model(name)))


def test_validate(capsys: pytest.CaptureFixture[str]) -> None:
    from pdplan.io.validation import validate_files
    from pdplan.report.catalog import validation_error, validation_view

    files = [DEFAULT, ROOT / "hardware_db" / "gpus" / "h100-sxm.yaml", ROOT / "tests" / "bad_inputs" / "gpu_zero.yaml"]
    result = validate_files(files)
    assert cli_json(capsys, "validate", *files, code=2) == library_json(validation_view(result))
    capsys.readouterr()
    run(["validate", *(str(f) for f in files), "--format", "json"])
    assert capsys.readouterr().err == f"error: {validation_error(result)}\n"


@pytest.mark.parametrize(
    ("phase", "tp", "dtype"), [("decode", 4, "bf16"), ("prefill", 1, "fp8"), ("prefill", 1, "bf16")]
)
def test_roofline(phase: str, tp: int, dtype: str, capsys: pytest.CaptureFixture[str]) -> None:
    from pdplan.io.serving_defaults import serving_defaults
    from pdplan.perf.memory import instance_memory
    from pdplan.perf.precision import Precision
    from pdplan.perf.roofline import phase_time
    from pdplan.report.perf import RooflineRun, roofline_view, roofline_warnings

    catalog = open_catalog()
    model, gpu = catalog.model("llama-3.1-70b"), catalog.gpu("h100-sxm")
    table = catalog.kernel_table(gpu.name)
    nbytes = 1.0 if dtype == "fp8" else 2.0
    time = phase_time(
        model, gpu, table, phase=phase, batch=8, tokens=2048, tp=tp, precision=Precision(weight_bytes=nbytes)
    )
    memory = instance_memory(model, gpu.memory_bytes, defaults=serving_defaults(), tp=tp, weight_dtype_bytes=nbytes)
    run_ = RooflineRun(model, gpu, table, batch=8, tokens=2048, tp=tp, pp=1, time=time, memory=memory)
    argv = ["roofline", "--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--phase", phase, "--dtype", dtype]
    assert cli_json(capsys, *argv, "--tp", str(tp), "--batch", "8", "--tokens", "2048") == library_json(
        roofline_view(run_)
    )
    run([*argv, "--tp", str(tp), "--batch", "8", "--tokens", "2048", "--format", "json"])
    warned = [line.removeprefix("warning: ") for line in capsys.readouterr().err.splitlines()]
    assert warned == roofline_warnings(run_)


@pytest.mark.parametrize("check_only", [True, False], ids=["check", "fit"])
def test_calibrate(check_only: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pdplan.calibrate.phase_times import check, fit, read_measurements
    from pdplan.report.perf import calibration_view, kernel_table_yaml

    path = tmp_path / "m.csv"
    path.write_text(MEASUREMENTS)
    rows, catalog = read_measurements(path), open_catalog()
    report = check(rows, catalog) if check_only else fit(rows, catalog)
    flags = ["--check"] if check_only else ["-o", str(tmp_path / "table.yaml")]
    assert cli_json(capsys, "calibrate", path, *flags) == library_json(calibration_view(report))
    if not check_only:
        assert report.table is not None
        assert (tmp_path / "table.yaml").read_text() == kernel_table_yaml(report.table)


@pytest.mark.parametrize(
    "flags",
    [
        {},
        {"granularity": "layer", "gpu": "h100-sxm", "prefill_tp": 4, "decode_tp": 2},
        {"granularity": "chunk", "gpu": "h100-sxm", "kv_dtype": "fp8"},
    ],
    ids=["request", "layer-tp-mismatch", "chunk-fp8"],
)
def test_transfer(flags: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    from pdplan.report.serving import transfer_view
    from pdplan.serving.transfer_one import one_transfer

    doc = one_transfer(
        open_catalog(), model="llama-3.1-70b", tokens=4096, link="ib-ndr", **{"granularity": "request", **flags}
    )
    argv = [a for k, v in flags.items() for a in ("--" + k.replace("_", "-"), str(v))]
    cli = cli_json(capsys, "transfer", "--model", "llama-3.1-70b", "--tokens", "4096", "--link", "ib-ndr", *argv)
    assert cli == library_json(transfer_view(doc))


EVALUATE_CASES = {
    "default": ("", ScenarioOverrides(), {}),
    "rate-xpyd": (
        "--model llama-3.1-8b --tp 1 --isl 1024 --osl 128 --xpyd 2P1D --rate 5",
        ScenarioOverrides(model="llama-3.1-8b", tp=1, isl=1024, osl=128, xpyd="2P1D"),
        {"rate": 5.0},
    ),
    "roles-link-slo": (
        "--model llama-3.1-8b --prefill-gpu h200-sxm --decode-gpu l40s --prefill-tp 2 --link roce-100g "
        "--granularity request --ttft-slo 400ms --kv-dtype fp8",
        ScenarioOverrides(
            model="llama-3.1-8b",
            prefill_gpu="h200-sxm",
            decode_gpu="l40s",
            prefill_tp=2,
            link="roce-100g",
            granularity="request",
            ttft_slo="400ms",
            kv_dtype="fp8",
        ),
        {},
    ),
    "colocated-concurrency": (
        "--model llama-3.1-8b --tp 1 --workload chat --colocated 2 --scheduler prefill-first --concurrency 8",
        ScenarioOverrides(model="llama-3.1-8b", tp=1, workload="chat", colocated=2, scheduler="prefill-first"),
        {"concurrency": 8},
    ),
}


@pytest.mark.parametrize("case", list(EVALUATE_CASES))
def test_evaluate(case: str, capsys: pytest.CaptureFixture[str]) -> None:
    from pdplan.evaluation import evaluate
    from pdplan.report.serving import evaluation_view

    argv, overrides, kwargs = EVALUATE_CASES[case]
    ev = evaluate(apply_overrides(load_scenario(DEFAULT), overrides), catalog=open_catalog(), **kwargs)
    assert cli_json(capsys, "evaluate", DEFAULT, *argv.split()) == library_json(evaluation_view(ev))


FAST = {"model": "llama-3.1-8b", "tp": 1, "isl": 512, "osl": 64}


@pytest.mark.parametrize(
    ("argv", "overrides", "kwargs"),
    [
        (["--rate", "4"], ScenarioOverrides(**FAST), {"rate": 4.0}),
        (["--colocated", "1", "--concurrency", "4"], ScenarioOverrides(**FAST, colocated=1), {"concurrency": 4}),
    ],
    ids=["rate", "colocated-concurrency"],
)
def test_simulate(
    argv: list[str], overrides: ScenarioOverrides, kwargs: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    from pdplan.report.serving import comparison_view
    from pdplan.sim.compare import simulate_scenario

    fast = [a for k, v in FAST.items() for a in ("--" + k, str(v))]
    sc = apply_overrides(load_scenario(DEFAULT), overrides)
    api = library_json(comparison_view(simulate_scenario(sc, catalog=open_catalog(), n_requests=1000, **kwargs)))
    cli = cli_json(capsys, "simulate", DEFAULT, *fast, *argv, "--requests", "1000")
    for doc in (cli, api):
        doc["seconds"] = 0.0  # wall time of the run
    assert cli == api


@pytest.mark.slow
@pytest.mark.parametrize(
    ("argv", "overrides", "kwargs"),
    [
        (
            "--gpu h100-sxm --tp 2 --prefill-tp 1 --link ib-ndr,roce-100g --granularity layer,request --isl 2048 "
            "--ttft-slo 3s --rate 20",
            ScenarioOverrides(
                gpu="h100-sxm",
                tp=2,
                prefill_tp=1,
                link="ib-ndr,roce-100g",
                granularity="layer,request",
                isl=2048,
                ttft_slo="3s",
            ),
            {"rate_rps": 20.0},
        ),
        ("--xpyd 2P1D --gpus 8", ScenarioOverrides(xpyd="2P1D"), {"budget_gpus": 8, "xpyd": (2, 1)}),
        (
            "--colocated 2 --scheduler prefill-first",
            ScenarioOverrides(colocated=2, scheduler="prefill-first"),
            {"colocated_count": 2},
        ),
    ],
    ids=["search-narrowed", "xpyd", "colocated"],
)
def test_optimize_with_the_shared_overrides(
    argv: str, overrides: ScenarioOverrides, kwargs: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    from pdplan.io.overrides import search_scenario
    from pdplan.report import to_json_text
    from pdplan.search.optimize import optimize

    sc = search_scenario(load_scenario(SMALL), overrides)
    api = json.loads(to_json_text(optimize(sc, catalog=open_catalog(), analyse=True, **kwargs)))
    cli = cli_json(capsys, "optimize", SMALL, *argv.split())
    for doc in (cli, api):
        doc["search"]["seconds"] = 0.0
    assert cli == api
