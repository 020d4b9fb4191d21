"""pdplan.transfer.data_plane / plane_setup and their terms in pdplan.transfer.kv, on hand-worked numbers."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from pdplan.cli import run
from pdplan.errors import SpecError
from pdplan.io.engines import load_engine
from pdplan.io.kv_backends import kv_backend, load_kv_backends
from pdplan.transfer.data_plane import DataPlane, pipeline_with_launch_s
from pdplan.transfer.kv import kv_transfer, pipeline_exposed_s
from pdplan.transfer.kv_inputs import KvShape, TransferConfig
from pdplan.transfer.plane_setup import resolve_data_plane


@dataclass(frozen=True)
class Link:
    line_rate_bytes_per_s: float
    per_message_latency_s: float
    efficiency: float


LINK = Link(1e10, 0.0, 1.0)  # 10 GB/s, no per-message latency: the data plane's terms stand alone
KV = KvShape(1000.0, num_layers=2, num_kv_heads=2)  # 1,000 B/token over 2 layers


def plane(**kw: object) -> DataPlane:
    base: dict[str, object] = {
        "backend": "t",
        "split": "block",
        "block_tokens": 16,
        "per_descriptor_s": 1e-6,
        "per_transfer_s": 1e-3,
    }
    base.update(kw)
    return DataPlane(**base)  # type: ignore[arg-type]


def test_descriptor_counts_by_split_and_tp() -> None:
    """#50913: 64 layers x 2 x ceil(4900/16) = 39,296; block 64: 9,856. tp_p 4 → tp_d 2: each decode worker reads
    2 prefill ranks (x2); MLA keeps one latent (parts 1); layer split: 64 x 2; buffer: one per pair."""
    p16, p64 = plane(), plane(block_tokens=64)
    assert p16.descriptors(4900, 64, 2, 2, 2)[()] == 39_296
    assert p64.descriptors(4900, 64, 2, 2, 2)[()] == 9_856
    assert p16.descriptors(4900, 64, 2, 4, 2)[()] == 2 * 39_296
    assert p16.descriptors(4900, 64, 2, 2, 4)[()] == 39_296
    assert p16.descriptors(4900, 64, 1, 2, 2)[()] == 19_648
    assert plane(split="layer").descriptors(4900, 64, 2, 2, 2)[()] == 128
    assert plane(split="buffer").descriptors(4900, 64, 2, 8, 2)[()] == 4


def test_request_time_hand_worked() -> None:
    """100 tokens → 1e5 B at 10 GB/s = 10 us; 2 layers x 2 x ceil(100/16)=7 = 28 descriptors x 1 us; launch 1 ms:
    1.038 ms, of which 1.028 ms is the data plane's."""
    res = kv_transfer([100.0], KV, LINK, TransferConfig(data_plane=plane()))
    assert res.descriptors[0] == 28
    assert res.time_s[0] == pytest.approx(1e-3 + 28e-6 + 1e-5)
    assert res.exposed_s[0] == pytest.approx(res.time_s[0])
    assert res.overhead_s[0] == pytest.approx(1.028e-3)


def test_staging_serial_and_overlapped() -> None:
    """Both sides at 10 GB/s per GPU, TP 1: 2 x 1e5 B / 1e10 = 20 us on top of the wire; overlapped at 5 GB/s the
    slowest stage takes 1e5/5e9 = 20 us instead of the wire's 10 us: +10 us."""
    serial = plane(
        per_transfer_s=0.0, per_descriptor_s=0.0, staging_sides=("prefill", "decode"), staging_bytes_per_s=1e10
    )
    res = kv_transfer([100.0], KV, LINK, TransferConfig(data_plane=serial))
    assert res.time_s[0] == pytest.approx(1e-5 + 2e-5)
    assert res.overhead_s[0] == pytest.approx(2e-5)
    over = plane(
        per_transfer_s=0.0,
        per_descriptor_s=0.0,
        staging_sides=("prefill", "decode"),
        staging_bytes_per_s=5e9,
        staging_overlapped=True,
    )
    assert kv_transfer([100.0], KV, LINK, TransferConfig(data_plane=over)).time_s[0] == pytest.approx(2e-5)


def test_bandwidth_cap() -> None:
    """A 2 GB/s cap under a 10 GB/s link: 1e5 B take 50 us."""
    capped = plane(per_transfer_s=0.0, per_descriptor_s=0.0, bandwidth_cap_bytes_per_s=2e9)
    res = kv_transfer([100.0], KV, LINK, TransferConfig(data_plane=capped))
    assert res.bandwidth_bytes_per_s == 2e9
    assert res.time_s[0] == pytest.approx(5e-5)


def test_pipeline_with_launch_hand_worked() -> None:
    """n=3, c=1, s=0.5, h=2: F1 = 1+2+0.5 = 3.5, F2 = max(3.5, 2)+0.5 = 4, F3 = max(4, 3)+0.5 = 4.5 → lag 1.5;
    n=1: h + s; h=0 equals pipeline_exposed_s."""
    one = np.asarray([1.0])
    assert pipeline_with_launch_s(np.asarray([3.0]), one, one * 0.5, 2.0)[0] == pytest.approx(1.5)
    assert pipeline_with_launch_s(one, one, one * 0.5, 2.0)[0] == pytest.approx(2.5)
    n, c, s = np.asarray([80.0, 10.0]), np.asarray([2e-3, 1.0]), np.asarray([4e-5, 3.0])
    np.testing.assert_allclose(pipeline_with_launch_s(n, c, s, 0.0), pipeline_exposed_s(n, c, s))


def test_layer_and_chunk_granularity_carry_descriptors() -> None:
    """Layer: 2 units of 2 x 7 = 14 descriptors (28 in all), the launch before the first; a long prefill hides
    all but the last layer's send. Chunk C = 64 over 100 tokens: a full chunk of 2 x 2 x 4 = 16 and a last of
    36 tokens, 2 x 2 x 3 = 12: 28."""
    cfg = TransferConfig(granularity="layer", data_plane=plane())
    res = kv_transfer([100.0], KV, LINK, cfg, prefill_time_s=1.0)
    assert res.descriptors[0] == 28
    assert res.exposed_s[0] == pytest.approx(14e-6 + 5e-6)
    chunk = TransferConfig(granularity="chunk", chunk_tokens=64, prefill_hbm_bytes_per_s=1e12, data_plane=plane())
    assert kv_transfer([100.0], KV, LINK, chunk, prefill_time_s=1.0).descriptors[0] == 28


def test_no_data_plane_unchanged() -> None:
    """Without a data plane the result is the link's alone: no descriptors, no overhead."""
    res = kv_transfer([100.0, 5000.0], KV, LINK, TransferConfig())
    assert np.all(res.descriptors == 0.0)
    assert np.all(res.overhead_s == 0.0)
    np.testing.assert_allclose(res.time_s, np.asarray([100.0, 5000.0]) * 1000.0 / 1e10)


def test_packaged_backends_and_connectors() -> None:
    """Four backends; TCP is host-bound and stages; vLLM's connector is NIXL over UCX at block 16, SGLang's Mooncake
    TE at page 1, TensorRT-LLM's transceiver NIXL at 32 tokens per block."""
    assert set(load_kv_backends().backends) == {"nixl-ucx", "nccl-p2p", "mooncake-te", "tcp"}
    assert kv_backend("TCP").staging is not None
    vllm = resolve_data_plane("engine", None, load_engine("vllm"))
    assert vllm is not None
    assert (vllm.backend, vllm.split, vllm.block_tokens) == ("nixl-ucx", "block", 16)
    sglang = resolve_data_plane("engine", None, load_engine("sglang"))
    assert sglang is not None
    assert (sglang.backend, sglang.block_tokens) == ("mooncake-te", 1)
    trt = resolve_data_plane("engine", None, load_engine("trtllm"))
    assert trt is not None
    assert (trt.backend, trt.split, trt.block_tokens) == ("nixl-ucx", "buffer", 32)
    default = resolve_data_plane(None, None, load_engine("vllm"))  # on by default: the engine's own connector
    assert default is not None
    assert (default.backend, default.block_tokens) == ("nixl-ucx", 16)
    assert resolve_data_plane("none", None, load_engine("vllm")) is None
    assert resolve_data_plane(None, None, load_engine("kernels")) is None  # no connector: the link alone
    assert resolve_data_plane("none", 64, load_engine("vllm")) is None  # block 64 pages the KV; no data plane


@pytest.mark.parametrize(
    ("backend", "block", "engine", "words"),
    [
        ("none", 128, "vllm", "takes block sizes 16, 32, 64, not 128"),  # the paging size is checked without a backend
        ("engine", 8, "vllm", "takes block sizes 16, 32, 64"),
        ("engine", 0, "vllm", ">= 1"),
        ("engine", None, "kernels", "names no kv_connector"),
        ("nixl", None, "vllm", "did you mean nixl-ucx"),
    ],
)
def test_resolve_refusals(backend: str | None, block: int | None, engine: str, words: str) -> None:
    with pytest.raises(SpecError, match=words):
        resolve_data_plane(backend, block, load_engine(engine))


def _bad_backend_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "backend.yaml"
    path.write_text(
        "schema_version: 1\nbackends:\n  slow:\n    description: d\n"
        "    per_descriptor_s: {value: 0.0, source: s}\n    per_transfer_s: {value: 0.0, source: s}\n"
        f"{body}    tiers: [host]\n    tiers_source: s\n"
    )
    return path


@pytest.mark.parametrize(
    "body",
    [
        "    bandwidth_cap_bytes_per_s: {value: 0, source: s}\n",
        "    staging: {sides: [decode], bytes_per_s: {value: 0, source: s}, overlapped: false, source: s}\n",
    ],
)
def test_backend_without_bandwidth_exits_2(tmp_path: Path, body: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A backend with no bandwidth (cap or staging rate 0) is a one-line error, exit 2."""
    args = ["transfer", "--model", "llama-3.1-8b", "--tokens", "1000", "--link", "ib-ndr"]
    assert run([*args, "--backend", str(_bad_backend_file(tmp_path, body))]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "greater than 0" in err


def test_block_size_zero_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--block-tokens 0 and a scenario's kv_block_tokens: 0 are one-line errors, exit 2."""
    args = ["transfer", "--model", "llama-3.1-8b", "--tokens", "1000", "--link", "ib-ndr", "--backend", "engine"]
    assert run([*args, "--block-tokens", "0"]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0
    default = Path(__file__).parents[2] / "pdplan" / "data" / "default_scenario.yaml"
    scenario = tmp_path / "s.yaml"
    scenario.write_text(default.read_text() + "kv_backend: engine\nkv_block_tokens: 0\n")
    assert run(["evaluate", str(scenario)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "kv_block_tokens" in err


def test_transfer_cli_reports_descriptors_and_overhead(capsys: pytest.CaptureFixture[str]) -> None:
    """pdplan transfer --backend engine: the descriptor count and the data plane's part of the time."""
    args = ["transfer", "--model", "qwen3-32b", "--tokens", "4900", "--link", "pcie4", "--format", "json"]
    tp = ["--prefill-tp", "2", "--decode-tp", "2", "--kv-dtype", "fp8"]
    assert run([*args, *tp, "--backend", "engine"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["backend"], doc["block_tokens"], doc["descriptors"]) == ("nixl-ucx", 16, 39_296)
    assert 0.0 < doc["overhead_s"] < doc["time_s"]
    assert run([*args, *tp]) == 0  # the default: the engine's own connector, as --backend engine
    assert json.loads(capsys.readouterr().out)["descriptors"] == 39_296
    assert run([*args, *tp, "--backend", "none"]) == 0
    assert "descriptors" not in json.loads(capsys.readouterr().out)
