"""GPU -> pod attribution from the kubelet's pod-resources API: the wire decoder, the client against a
real gRPC server on a unix socket, and the attribution it gives through the exporter (stand-in NVML)."""

from __future__ import annotations

import pytest

from obsctl.exporters.app import Exporter
from obsctl.exporters.config import AttributionConfig, KubernetesAttribution, load_exporter_config
from obsctl.exporters.gpu.attribution import AttributionCollector
from obsctl.exporters.gpu.collector import GpuCollector
from obsctl.exporters.gpu.inventory import PodBinding
from obsctl.exporters.gpu.podresources import PodResourcesClient, decode_list_response
from support import stubnvml
from support.podresources_server import PodResourcesServer, encode_response

U0, U1, U2 = stubnvml.h100_uuid(0), stubnvml.h100_uuid(1), stubnvml.h100_uuid(2)
PODS = [
    {"name": "vllm-0", "namespace": "llm-serving",
     "containers": [{"name": "engine", "devices": [("nvidia.com/gpu", [U0, U1]), ("example.com/nic", ["eth1"])],
                     "cpu_ids": [2, 3, 130]}]},
    {"name": "trainer-7", "namespace": "training", "containers": [
        {"name": "init", "cpu_ids": [1]},
        {"name": "main", "devices": [("nvidia.com/gpu", ["3"])]}]},  # index device-id strategy
    {"name": "mig-job", "namespace": "training", "containers": [
        {"name": "main", "devices": [("nvidia.com/mig-1g.10gb", ["MIG-aaaa"])]}]},
]


def test_decoder_maps_gpu_devices_to_pods_and_skips_the_rest():
    devices = decode_list_response(encode_response(PODS))
    assert devices == {U0: [PodBinding("llm-serving", "vllm-0", "engine")],
                       U1: [PodBinding("llm-serving", "vllm-0", "engine")],
                       "3": [PodBinding("training", "trainer-7", "main")]}
    assert decode_list_response(b"") == {}


@pytest.mark.parametrize("garbage", [b"\x0a\x05ab", b"\x0a", b"\x0f\x00", b"\x0a\x02\x08\x01"])
def test_decoder_refuses_what_is_not_a_response(garbage):
    with pytest.raises(ValueError):
        decode_list_response(garbage)


def test_client_lists_caches_and_reports_a_gone_kubelet(tmp_path):
    sock = tmp_path / "kubelet.sock"
    with PodResourcesServer(sock, PODS) as server:
        client = PodResourcesClient(str(sock), ttl_seconds=60)
        first = client.devices()
        assert first.error == "" and set(first.devices) == {U0, U1, "3"}
        assert client.devices() is first and server.calls == 1  # cached for the TTL
        client.ttl = 0
        assert client.devices().devices == first.devices and server.calls == 2
    gone = client.devices()
    assert gone.devices == {} and gone.error.startswith(f"kubelet pod-resources {sock}:")
    client.close()


def test_pods_on_gpus_attribute_them_through_the_exporter(nvml_env, tmp_path):
    nvml_env.write(stubnvml.h100_8x())
    sock = tmp_path / "kubelet.sock"
    config = AttributionConfig(kubernetes=KubernetesAttribution(namespace_classes={"llm-serving": "llm-serving",
                                                                                   "training": "finetune"}))
    with PodResourcesServer(sock, PODS):
        attribution = AttributionCollector(config, autostart=False, pod_resources=PodResourcesClient(str(sock)))
        exporter = Exporter([GpuCollector(nvml_env.source(), "nvml"), attribution], process_metrics=False)
        try:
            exporter.scrape(5.0)  # the GPU source answers; then one process round (none run here)
            attribution.refresher.refresh()
            fams = exporter.scrape(5.0)
        finally:
            exporter.close()
    info = sorted((s.labels["gpu"], s.labels["workload_class"], s.labels["owner"], s.labels["attribution_source"])
                  for m in fams for s in m.samples if s.name == "obsctl_gpu_attribution_info")
    assert info == [("0", "llm-serving", "llm-serving/vllm-0", "kubernetes"),
                    ("1", "llm-serving", "llm-serving/vllm-0", "kubernetes"),
                    ("3", "finetune", "training/trainer-7", "kubernetes")]
    status = {s.labels["uuid"]: s.labels["status"] for m in fams for s in m.samples
              if s.name == "obsctl_gpu_attribution_status"}
    assert status[U2] == "unattributed"


def test_unreachable_kubelet_marks_unclaimed_gpus_error(nvml_env, tmp_path):
    nvml_env.write(stubnvml.h100_8x())
    attribution = AttributionCollector(autostart=False, pod_resources=PodResourcesClient(str(tmp_path / "none.sock")))
    exporter = Exporter([GpuCollector(nvml_env.source(), "nvml"), attribution], process_metrics=False)
    try:
        exporter.scrape(5.0)
        attribution.refresher.refresh()
        fams = exporter.scrape(5.0)
    finally:
        exporter.close()
    assert {s.labels["status"] for m in fams for s in m.samples if s.name == "obsctl_gpu_attribution_status"} == {"error"}


def test_spec_classes_selecting_one_namespace_become_namespace_classes():
    from pathlib import Path

    spec = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes" / "base" / "obsctl.yaml"
    config = load_exporter_config(spec)
    assert config.attribution.kubernetes.namespace_classes == {"llm-serving": "llm-serving", "training": "finetune"}
