"""A kubelet pod-resources stand-in: a real gRPC server on a unix socket answering
``v1.PodResourcesLister/List`` with a ListPodResourcesResponse encoded here from the protobuf wire
format (field numbers of k8s.io/kubelet/pkg/apis/podresources/v1/api.proto), independently of the
exporter's decoder."""

from __future__ import annotations

from concurrent import futures
from pathlib import Path

import grpc


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _str(number: int, text: str) -> bytes:
    return _field(number, text.encode())


def encode_response(pods: list[dict]) -> bytes:
    """``pods``: ``[{name, namespace, containers: [{name, devices: [(resource, [ids])], cpu_ids}]}]``.

    Writes what a real kubelet adds too: packed ``cpu_ids``, a NUMA ``topology`` per device block
    and a ``memory`` block, so the decoder must skip fields it does not read."""
    out = b""
    for pod in pods:
        body = _str(1, pod["name"]) + _str(2, pod["namespace"])
        for c in pod["containers"]:
            cbody = _str(1, c["name"])
            for resource, ids in c.get("devices", []):
                numa = _field(1, _varint(0 << 3 | 0) + _varint(1))  # TopologyInfo{nodes: [NUMANode{ID: 1}]}
                cbody += _field(2, _str(1, resource) + b"".join(_str(2, i) for i in ids) + _field(3, numa))
            if c.get("cpu_ids"):
                cbody += _field(3, b"".join(_varint(n) for n in c["cpu_ids"]))
            cbody += _field(4, _str(1, "memory") + _varint(2 << 3 | 0) + _varint(1 << 30))
            body += _field(3, cbody)
        out += _field(1, body)
    return out


class PodResourcesServer:
    """Serves ``pods`` (mutable: tests change it between calls) on ``socket``; ``calls`` counts Lists."""

    def __init__(self, socket: Path, pods: list[dict]) -> None:
        self.socket, self.pods, self.calls = socket, pods, 0
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        handler = grpc.unary_unary_rpc_method_handler(self._list, request_deserializer=lambda b: b,
                                                      response_serializer=lambda b: b)
        self._server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            "v1.PodResourcesLister", {"List": handler}),))
        self._server.add_insecure_port(f"unix:{socket}")

    def _list(self, _request: bytes, _context) -> bytes:
        self.calls += 1
        return encode_response(self.pods)

    def __enter__(self) -> PodResourcesServer:
        self._server.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.stop(0).wait()
