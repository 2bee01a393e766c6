"""Errors a GPU metric source raises when the whole source is unavailable.

Per-field and per-GPU faults never raise: they become absent series or ``obsctl_gpu_up 0``.
Only a fault that takes down every GPU of a source (library missing, driver not loaded,
dcgm-exporter unreachable) raises :class:`GpuSourceError`; the exporter app turns it into
meta series and one log line.
"""

from __future__ import annotations

#: Reasons used by the sources (short, machine-readable, stable: they become label values).
REASON_LIBRARY_NOT_FOUND = "library_not_found"
REASON_DRIVER_NOT_LOADED = "driver_not_loaded"
REASON_LIB_RM_VERSION_MISMATCH = "lib_rm_version_mismatch"
REASON_NO_PERMISSION = "no_permission"
REASON_NVML_ERROR = "nvml_error"
REASON_DEADLINE_EXCEEDED = "deadline_exceeded"
REASON_DCGM_UNREACHABLE = "dcgm_unreachable"
REASON_DCGM_TIMEOUT = "dcgm_timeout"
REASON_DCGM_BAD_RESPONSE = "dcgm_bad_response"


class GpuSourceError(Exception):
    """The whole GPU source is unavailable for this scrape.

    Attributes:
        reason: short machine reason, e.g. ``"library_not_found"``, ``"driver_not_loaded"``,
            ``"lib_rm_version_mismatch"``, ``"dcgm_unreachable"``, ``"dcgm_timeout"``,
            ``"dcgm_bad_response"`` (see the ``REASON_*`` constants).
        detail: human-readable detail for the one log line (may be empty).
    """

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}" if detail else reason)
