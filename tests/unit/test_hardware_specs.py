"""Hardware catalogue: every YAML validates, the §3 ids exist, the schema rejects bad input."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from pdplan.specs.hardware import (
    GPU_FACT_FIELDS,
    LINK_FACT_FIELDS,
    GpuSpec,
    LinkSpec,
    PriceRange,
)

DB = Path(__file__).resolve().parents[2] / "hardware_db"
GPU_FILES = sorted((DB / "gpus").glob("*.yaml"))
LINK_FILES = sorted((DB / "links").glob("*.yaml"))

# docs/architecture.md §3, identifiers users type.
GPU_IDS = [
    "a100-sxm-40gb",
    "a100-sxm-80gb",
    "a100-pcie-80gb",
    "h100-sxm",
    "h100-pcie",
    "h200-sxm",
    "h800-sxm",
    "h20",
    "l40s",
    "l40",
    "l4",
    "b200",
    "mi300x",
]
LINK_IDS = [
    "nvlink3",
    "nvlink4",
    "nvlink5",
    "pcie4",
    "pcie5",
    "pcie6",
    "ib-hdr",
    "ib-ndr",
    "ib-xdr",
    "roce-100g",
    "roce-200g",
    "roce-400g",
    "eth-10g",
    "eth-25g",
    "eth-100g",
    "dci-100g",
    "dci-400g",
]


def _load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def _gpu(name: str) -> GpuSpec:
    return GpuSpec.model_validate(_load(DB / "gpus" / f"{name}.yaml"))


@pytest.mark.parametrize("path", GPU_FILES, ids=lambda p: p.stem)
def test_every_gpu_file_validates_and_is_named_by_its_id(path: Path) -> None:
    spec = GpuSpec.model_validate(_load(path))
    assert spec.name == path.stem


@pytest.mark.parametrize("path", LINK_FILES, ids=lambda p: p.stem)
def test_every_link_file_validates_and_is_named_by_its_id(path: Path) -> None:
    spec = LinkSpec.model_validate(_load(path))
    assert spec.name == path.stem


def test_every_architecture_id_exists() -> None:
    assert {p.stem for p in GPU_FILES} >= set(GPU_IDS)
    assert {p.stem for p in LINK_FILES} >= set(LINK_IDS)


def test_h100_bf16_is_the_dense_figure() -> None:
    # NVIDIA prints 1,979* TFLOPS "with sparsity"; dense is half of it: 989.4e12 FLOP/s.
    spec = _gpu("h100-sxm")
    assert spec.bf16_flops_per_s == pytest.approx(989.4e12)
    assert spec.bf16_flops_per_s == pytest.approx(1978.9e12 / 2, rel=1e-4)


@pytest.mark.parametrize("path", GPU_FILES, ids=lambda p: p.stem)
def test_fp8_is_twice_bf16_where_present(path: Path) -> None:
    spec = GpuSpec.model_validate(_load(path))
    if spec.fp8_flops_per_s is None:
        assert spec.architecture == "ampere"  # no FP8 tensor cores
        return
    # NVIDIA's own L40S table gives 733 vs 362.05 (ratio 2.02), hence the 2.5% tolerance.
    assert spec.fp8_flops_per_s == pytest.approx(2 * spec.bf16_flops_per_s, rel=0.025)


def test_units_become_si() -> None:
    spec = _gpu("h100-sxm")
    assert spec.memory_bytes == 80 * 2**30
    assert spec.memory_bytes_per_s == pytest.approx(3.35e12)
    assert spec.scale_up_bytes_per_s == pytest.approx(450e9)
    link = LinkSpec.model_validate(_load(DB / "links" / "ib-ndr.yaml"))
    assert link.line_rate_bytes_per_s == pytest.approx(50e9)  # 400 Gb/s
    assert link.per_message_latency_s == pytest.approx(2e-6)
    assert link.achievable_bytes_per_s == pytest.approx(50e9 * link.efficiency)


def test_price_typical_is_the_midpoint() -> None:
    price = PriceRange(low_usd_per_gpu_hour=1.9, high_usd_per_gpu_hour=5.0)
    assert price.typical_usd_per_gpu_hour == pytest.approx(3.45)
    assert price.typical == pytest.approx(3.45)


# --- rejection ---


@pytest.fixture
def gpu_data() -> dict[str, Any]:
    return _load(DB / "gpus" / "h100-sxm.yaml")


@pytest.fixture
def link_data() -> dict[str, Any]:
    return _load(DB / "links" / "ib-ndr.yaml")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("bf16_flops_per_s", "0 TFLOPS"),
        ("bf16_flops_per_s", -1.0),
        ("memory_bytes", "0 GiB"),
        ("memory_bytes_per_s", "-3.35 TB/s"),
        ("scale_up_bytes_per_s", 0),
        ("tdp_w", 0),
        ("gpus_per_node", 0),
        ("pcie_gen", 0),
    ],
)
def test_gpu_rejects_zero_and_negative(gpu_data: dict[str, Any], field: str, value: object) -> None:
    gpu_data[field] = value
    with pytest.raises(ValidationError) as err:
        GpuSpec.model_validate(gpu_data)
    assert field in str(err.value)


def test_gpu_error_names_the_allowed_range(gpu_data: dict[str, Any]) -> None:
    gpu_data["memory_bytes_per_s"] = "0 TB/s"
    with pytest.raises(ValidationError, match="allowed range"):
        GpuSpec.model_validate(gpu_data)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("bf16_flops_per_s", "989 TB/s"),  # a rate where a FLOP rate belongs
        ("memory_bytes", "80 GiB/s"),
        ("memory_bytes_per_s", "3.35 TFLOPS"),
        ("memory_bytes_per_s", "fast"),
        ("tdp_w", "700 kW?"),
        ("tdp_w", True),
    ],
)
def test_gpu_rejects_bad_units(gpu_data: dict[str, Any], field: str, value: object) -> None:
    gpu_data[field] = value
    with pytest.raises(ValidationError):
        GpuSpec.model_validate(gpu_data)


def test_gpu_rejects_unknown_field(gpu_data: dict[str, Any]) -> None:
    gpu_data["hbm_bandwidth"] = "3.35 TB/s"
    with pytest.raises(ValidationError, match="hbm_bandwidth"):
        GpuSpec.model_validate(gpu_data)


def test_gpu_rejects_unknown_enum_and_version(gpu_data: dict[str, Any]) -> None:
    bad = (("vendor", "intel"), ("scale_up_fabric", "nvlink9"), ("schema_version", 2))
    for field, value in bad:
        data = copy.deepcopy(gpu_data)
        data[field] = value
        with pytest.raises(ValidationError):
            GpuSpec.model_validate(data)


@pytest.mark.parametrize("field", GPU_FACT_FIELDS)
def test_gpu_missing_source_for_a_fact_raises(gpu_data: dict[str, Any], field: str) -> None:
    del gpu_data["sources"][field]
    with pytest.raises(ValidationError, match=field):
        GpuSpec.model_validate(gpu_data)


def test_gpu_null_fact_needs_no_source(gpu_data: dict[str, Any]) -> None:
    gpu_data["price"] = None
    del gpu_data["sources"]["price"]
    assert GpuSpec.model_validate(gpu_data).price is None


def test_gpu_blank_or_unknown_source_key_raises(gpu_data: dict[str, Any]) -> None:
    gpu_data["sources"]["tdp_w"] = "   "
    with pytest.raises(ValidationError, match="tdp_w"):
        GpuSpec.model_validate(gpu_data)
    gpu_data["sources"]["tdp_w"] = "datasheet"
    gpu_data["sources"]["tdp"] = "typo"
    with pytest.raises(ValidationError, match="unknown key"):
        GpuSpec.model_validate(gpu_data)


def test_price_range_must_be_ordered_and_positive() -> None:
    with pytest.raises(ValidationError, match="must be <="):
        PriceRange(low_usd_per_gpu_hour=5.0, high_usd_per_gpu_hour=1.0)
    with pytest.raises(ValidationError):
        PriceRange(low_usd_per_gpu_hour=0.0, high_usd_per_gpu_hour=1.0)


def test_specs_are_frozen(gpu_data: dict[str, Any]) -> None:
    spec = GpuSpec.model_validate(gpu_data)
    with pytest.raises(ValidationError):
        spec.tdp_w = 1.0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("line_rate_bytes_per_s", "0 Gb/s"),
        ("line_rate_bytes_per_s", "400 GiB"),
        ("per_message_latency_s", "-2 us"),
        ("per_message_latency_s", "2 parsecs"),
        ("efficiency", 0.0),
        ("efficiency", 1.5),
        ("kind", "carrier-pigeon"),
    ],
)
def test_link_rejects_bad_values(link_data: dict[str, Any], field: str, value: object) -> None:
    link_data[field] = value
    with pytest.raises(ValidationError):
        LinkSpec.model_validate(link_data)


def test_link_rejects_unknown_field(link_data: dict[str, Any]) -> None:
    link_data["bandwidth"] = "400 Gb/s"
    with pytest.raises(ValidationError, match="bandwidth"):
        LinkSpec.model_validate(link_data)


@pytest.mark.parametrize("field", LINK_FACT_FIELDS)
def test_link_missing_source_for_a_fact_raises(link_data: dict[str, Any], field: str) -> None:
    del link_data["sources"][field]
    with pytest.raises(ValidationError, match=field):
        LinkSpec.model_validate(link_data)


@pytest.mark.parametrize(
    ("name", "sms"),
    [("a100-sxm-80gb", 108), ("h100-sxm", 132), ("h100-pcie", 114), ("h200-sxm", 132), ("l40s", 142), ("b200", 148)],
)
def test_sm_count_is_the_enabled_product_count(name: str, sms: int) -> None:
    # Whitepapers: GH100 has 144 SMs, the H100 SXM5 product enables 132, the PCIe card 114;
    # GA100 128 -> A100 108; AD102 L40S 142; B200 2 x 74.
    spec = _gpu(name)
    assert spec.sm_count == sms
    assert spec.sources["sm_count"].strip()


def test_sm_count_is_optional(gpu_data: dict[str, Any]) -> None:
    del gpu_data["sm_count"]
    del gpu_data["sources"]["sm_count"]
    assert GpuSpec.model_validate(gpu_data).sm_count is None
