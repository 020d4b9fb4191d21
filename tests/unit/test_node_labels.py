"""``pdplan/data/export/node_labels.yaml`` follows the rule NVIDIA GPU Feature Discovery labels nodes by
(NVIDIA/k8s-device-plugin ``internal/lm/resource.go``: ``nvidia.com/gpu.product`` is the NVML device name with every
space replaced by '-'), and the H100 SXM5 80GB label is the one NVIDIA's GPU Operator documentation shows on such a
node (issue #25: ``NVIDIA-H100-80GB-HBM3``, not AIConfigurator's ``NVIDIA-H100-SXM5-80GB``)."""

from __future__ import annotations

from pdplan.io.export_data import node_labels


def gfd_product(nvml_name: str) -> str:
    """GFD's ``productLabel`` for a full GPU without sharing: the NVML name, spaces → '-'."""
    return nvml_name.replace(" ", "-")


def test_every_gpu_product_label_is_its_nvml_name_with_dashes() -> None:
    labels = node_labels().labels
    products = {gpu: label for gpu, label in labels.items() if label.key == "nvidia.com/gpu.product"}
    assert products  # every packaged label is a GFD product label
    for gpu, label in products.items():
        assert label.nvml_name is not None, gpu
        assert label.value == gfd_product(label.nvml_name), gpu
        assert " " not in label.value, gpu
        assert label.source, gpu


def test_the_h100_sxm5_label_is_what_gfd_sets_on_an_h100_sxm5_node() -> None:
    """NVIDIA/cloud-native-docs gpu-operator/manifests/output/mig-nvidia-smi.txt @ 1c9e5bc1: ``nvidia-smi -L`` prints
    "GPU 0: NVIDIA H100 80GB HBM3"; mig-node-labels.json (the same node): ``NVIDIA-H100-80GB-HBM3``."""
    label = node_labels().labels["h100-sxm"]
    assert label.nvml_name == "NVIDIA H100 80GB HBM3"
    assert label.value == gfd_product("NVIDIA H100 80GB HBM3") == "NVIDIA-H100-80GB-HBM3"
    assert label.value != "NVIDIA-H100-SXM5-80GB"  # no NVML name says SXM5
    assert "NVIDIA doc" in label.source


def test_the_rule_reproduces_gfds_own_documented_labels() -> None:
    """Hand-checked pairs from NVIDIA's GPU Operator docs (NVIDIA/cloud-native-docs gpu-operator/gpu-operator-mig.rst
    @ cdfe9d8e, driver 460.73.01: nvidia-smi -L "A100-SXM4-40GB", label A100-SXM4-40GB-MIG-1g.5gb) and the H100
    node above: the rule (plus GFD's "-MIG-<profile>" suffix) gives them."""
    assert gfd_product("A100-SXM4-40GB") + "-MIG-1g.5gb" == "A100-SXM4-40GB-MIG-1g.5gb"
    assert gfd_product("NVIDIA H100 80GB HBM3") + "-MIG-1g.10gb" == "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"
