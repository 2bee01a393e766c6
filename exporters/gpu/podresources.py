"""GPU -> pod from the kubelet's pod-resources API, for GPU attribution on Kubernetes with NVML.

The kubelet serves ``v1.PodResourcesLister/List`` (gRPC) on a unix socket, by default
``/var/lib/kubelet/pod-resources/kubelet.sock`` (k8s.io/kubelet/pkg/apis/podresources/v1/api.proto);
dcgm-exporter reads the same socket for its pod labels. ``List`` answers, for every pod, each
container's devices per extended resource; for ``nvidia.com/gpu`` the NVIDIA device plugin's device
ids are the GPU UUIDs (``GPU-...``, its default ``uuid`` strategy) or GPU indices (``index``
strategy). MIG devices (``nvidia.com/mig-*`` resources, ids ``MIG-...``) name a MIG device, not
the GPU instance NVML reports, and are not mapped.

The response is decoded here from the protobuf wire format (five nested messages, only string
fields read; unknown fields skipped), so only ``grpcio`` is needed, no generated code. The answer
is cached for ``ttl_seconds``; a failed call is reported (``error``) and retried on the next scrape.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from obsctl.errors import UsageError
from obsctl.exporters.gpu.inventory import PodBinding

log = logging.getLogger(__name__)

DEFAULT_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
LIST_METHOD = "/v1.PodResourcesLister/List"
#: Extended resources whose device ids are whole GPUs.
GPU_RESOURCES = frozenset({"nvidia.com/gpu"})
#: Largest List answer accepted (bytes): a node's pods and devices are a few KiB.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _fields(data: bytes) -> list[tuple[int, bytes | int]]:
    """``[(field number, bytes of a length-delimited field or int of a varint)]``; fixed-width fields skipped."""
    out: list[tuple[int, bytes | int]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            out.append((number, value))
        elif wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > len(data):
                raise ValueError("truncated field")
            out.append((number, data[pos:pos + length]))
            pos += length
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
    if pos != len(data):
        raise ValueError("truncated fixed-width field")
    return out


def _text(value: bytes | int) -> str:
    if not isinstance(value, bytes):
        raise ValueError("string field with a varint value")
    return value.decode("utf-8")


def decode_list_response(data: bytes) -> dict[str, list[PodBinding]]:
    """``{device id: [PodBinding]}`` of the GPU resources in a ``ListPodResourcesResponse``.

    Messages read (field numbers of api.proto): ListPodResourcesResponse{1: PodResources},
    PodResources{1: name, 2: namespace, 3: ContainerResources}, ContainerResources{1: name,
    2: ContainerDevices}, ContainerDevices{1: resource_name, 2: device_ids}.

    Raises:
        ValueError: the bytes are not such a message.
    """
    devices: dict[str, list[PodBinding]] = {}
    for number, pod_bytes in _fields(data):
        if number != 1 or not isinstance(pod_bytes, bytes):
            continue
        pod = dict.fromkeys(("name", "namespace"), "")
        containers: list[bytes] = []
        for n, value in _fields(pod_bytes):
            if n == 1:
                pod["name"] = _text(value)
            elif n == 2:
                pod["namespace"] = _text(value)
            elif n == 3 and isinstance(value, bytes):
                containers.append(value)
        for container_bytes in containers:
            container, device_blocks = "", []
            for n, value in _fields(container_bytes):
                if n == 1:
                    container = _text(value)
                elif n == 2 and isinstance(value, bytes):
                    device_blocks.append(value)
            for block in device_blocks:
                parts = _fields(block)
                resource = next((_text(v) for n, v in parts if n == 1), "")
                if resource not in GPU_RESOURCES:
                    continue
                binding = PodBinding(pod["namespace"], pod["name"], container)
                for n, value in parts:
                    if n == 2:
                        devices.setdefault(_text(value), []).append(binding)
    return devices


@dataclass
class PodDevices:
    """One answer of the kubelet: ``devices`` by device id, ``error`` when the call failed."""

    devices: dict[str, list[PodBinding]] = field(default_factory=dict)
    error: str = ""


class PodResourcesClient:
    """``List`` on the kubelet's pod-resources socket, cached for ``ttl_seconds``.

    Args:
        socket_path: the kubelet's socket (mounted read-only into the exporter's pod).
        timeout_seconds: deadline of one call.
        ttl_seconds: how long an answer (or a failure) is reused.

    Raises:
        UsageError: grpcio is not installed (``pip install 'obsctl[kubernetes]'``).
    """

    def __init__(self, socket_path: str = DEFAULT_SOCKET, timeout_seconds: float = 1.0, ttl_seconds: float = 15.0) -> None:
        try:
            import grpc
        except ImportError:
            raise UsageError("--attribution.pod-resources-socket needs grpcio: pip install 'obsctl[kubernetes]'") from None
        self.socket_path = socket_path
        self.timeout = timeout_seconds
        self.ttl = ttl_seconds
        self._channel = grpc.insecure_channel(f"unix:{socket_path}",
                                              options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)])
        self._list = self._channel.unary_unary(LIST_METHOD, request_serializer=lambda _request: b"",
                                               response_deserializer=decode_list_response)
        self._rpc_error = grpc.RpcError
        self._lock = threading.Lock()
        self._cached: PodDevices | None = None
        self._at = 0.0

    def devices(self) -> PodDevices:
        """The cached answer, or a fresh ``List`` when it is older than ``ttl_seconds``."""
        with self._lock:
            now = time.monotonic()
            if self._cached is not None and now - self._at < self.ttl:
                return self._cached
            try:
                answer = PodDevices(self._list(None, timeout=self.timeout))
            except self._rpc_error as exc:
                detail = exc.details() if hasattr(exc, "details") else str(exc)
                answer = PodDevices(error=f"kubelet pod-resources {self.socket_path}: {detail}")
                log.warning("%s", answer.error)
            except ValueError as exc:  # an answer that is not a ListPodResourcesResponse
                answer = PodDevices(error=f"kubelet pod-resources {self.socket_path}: bad answer: {exc}")
                log.warning("%s", answer.error)
            self._cached, self._at = answer, now
            return answer

    def close(self) -> None:
        """Close the gRPC channel."""
        self._channel.close()
