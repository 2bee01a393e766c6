"""Test helpers for the stand-in NVML: build nvml_stub.c, load a private pynvml bound to it, scenarios.

``load_pynvml(so_path)`` executes nvidia-ml-py's real ``pynvml.py`` as a fresh module object (its
own library handle and function-pointer cache) whose ``CDLL("libnvidia-ml.so.1")`` resolves to
``so_path``, so every pynvml wrapper and ctypes structure runs unmodified against the stub.
A subprocess can instead put the built ``libnvidia-ml.so.1`` on ``LD_LIBRARY_PATH`` and use the
ordinary ``import pynvml``. Scenario syntax is documented at the top of nvml_stub.c.
"""

from __future__ import annotations

import ctypes
import importlib.util
import itertools
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pynvml

SOURCE = Path(__file__).with_name("nvml_stub.c")
ENV = "OBSCTL_NVML_STUB_SCENARIO"
_counter = itertools.count()


def build(out_dir: Path) -> Path:
    """Compile the stub with gcc into ``out_dir/libnvidia-ml.so.1``; returns its path.

    Raises:
        RuntimeError: gcc is missing or the compile failed (message has gcc's output).
    """
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        raise RuntimeError("gcc not found: the NVML stand-in is built from tests/support/nvml_stub.c")
    out_dir.mkdir(parents=True, exist_ok=True)
    so = out_dir / "libnvidia-ml.so.1"
    proc = subprocess.run([gcc, "-shared", "-fPIC", "-O2", "-Wall", "-o", str(so), str(SOURCE), "-lpthread"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"building {SOURCE} failed:\n{proc.stderr}")
    return so


def load_pynvml(so_path: Path | str) -> ModuleType:
    """A fresh copy of the installed pynvml whose library loader opens ``so_path``."""
    spec = importlib.util.spec_from_file_location(f"pynvml_stub_{next(_counter)}", pynvml.__file__)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # pynvml looks itself up in sys.modules while importing
    spec.loader.exec_module(mod)
    real_cdll = ctypes.CDLL

    def cdll(name, *args, **kwargs):  # pynvml calls CDLL("libnvidia-ml.so.1")
        return real_cdll(str(so_path), *args, **kwargs)

    mod.CDLL = cdll
    return mod


def controls(so_path: Path | str) -> ctypes.CDLL:
    """The stub's test-only functions: nvmlStub_Reload, nvmlStub_CallCount, nvmlStub_DeviceCallCount."""
    lib = ctypes.CDLL(str(so_path))
    lib.nvmlStub_CallCount.restype = ctypes.c_ulonglong
    lib.nvmlStub_DeviceCallCount.restype = ctypes.c_ulonglong
    return lib


def write_scenario(path: Path, text: str) -> Path:
    """Write a scenario atomically and point the stub at it (the caller reloads or re-inits)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    os.environ[ENV] = str(path)
    return path


# ---- scenarios (values in NVML units; tests compute the expected base-unit values from these) ----

H100_BUSES = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)


def h100_uuid(i: int) -> str:
    return f"GPU-{i:08x}-1111-2222-3333-44445555{i:04x}"


def h100_gpu(i: int, bus: int | None = None) -> str:
    """One H100 SXM with every field supported; numbers vary with ``i`` so GPUs are told apart."""
    bus = H100_BUSES[i % 8] if bus is None else bus
    reasons = {0: 0x1, 1: 0x4 | 0x20}.get(i, 0)
    mask = 0x3FFFF & ~(1 << 5) if i == 7 else 0x3FFFF
    # NVLink error totals: GPU 6 has a flaky link (CRC flit errors and replays), GPU 5's driver does not
    # count CRC data errors (NOT_SUPPORTED for that field only).
    nvlink_errors = (f"nvl_crc_flit {120000 if i == 6 else i}\n"
                     f"nvl_crc_data {'err=3' if i == 5 else 2 * i}\n"
                     f"nvl_replay {900 if i == 6 else 0}\n"
                     f"nvl_recovery {1 if i == 6 else 0}")
    return f"""gpu
name NVIDIA H100 80GB HBM3
uuid {h100_uuid(i)}
bus 00000000:{bus:02X}:00.0
util {87 - i} {41 + i}
mem 85520809984 {(10 + i) * 1073741824} {85520809984 - (10 + i) * 1073741824} 566231040
power {612345 + i * 1000}
power_limit 700000
energy {123456789 + i * 1000}
temp {45 + i}
mem_temp {52 + i}
clock_sm 1980
clock_mem 2619
reasons {reasons}
ecc {3 * i} {1 if i == 4 else 0}
remap {2 if i == 4 else 0} {1 if i == 4 else 0} 0 0
replay {i}
nvlink 18 {mask}
{nvlink_errors}
mig 0 0
pcie_tx 1500
pcie_rx 2500
procs {f'{4242 + i} 0 {5000 + i} 0' if i < 2 else ''}
events
"""


def h100_8x(driver: str = "550.54.15", extra: str = "") -> str:
    """8x H100 SXM (HGX), driver 550.54.15."""
    return f"driver {driver}\n" + "".join(h100_gpu(i) for i in range(8)) + extra


def h100_n(n: int, vary: bool = False, energy_delay_ms: int = 0) -> str:
    """``n`` H100s (for the benchmark's 64-GPU case); ``vary``: values move on every read, as under load;
    ``energy_delay_ms``: each GPU's energy counter read (nvmlDeviceGetTotalEnergyConsumption) takes that long,
    as a real driver's does (3.8-4.7 ms measured on an H200, docs/benchmarks-gpu.md)."""
    gpus = "".join(h100_gpu(i, bus=i % 256) for i in range(n))
    if energy_delay_ms:
        gpus = re.sub(r"\nenergy (\d+)\n", rf"\nenergy \1 delay_ms={energy_delay_ms}\n", gpus)
    return "driver 550.54.15\n" + ("vary 1\n" if vary else "") + gpus


H200_VM_UUID = "GPU-1857fbb4-f4dc-9ac1-2413-c8439bf48a9e"


def h200_vm() -> str:
    """The H200 of tests/fixtures/nvml-real/ (driver 580.159.04, passed through to a VM): the raw
    values its driver answered while busy (power-capped at 690 W), no NVLink, no processes."""
    return f"""driver 580.159.04
gpu
name NVIDIA H200
uuid {H200_VM_UUID}
bus 00000000:00:06.0
util 100 23
mem 150754820096 925696000 149184184320 644939776
power 690149
power_limit 700000
energy 7985975
temp 59
mem_temp 48
clock_sm 1485
clock_mem 3201
reasons 4
ecc 0 0
remap 0 0 0 0
replay 0
mig 0 0
pcie_tx 7382
pcie_rx 14837
events
"""


A100_UUID = "GPU-a100a100-0000-1111-2222-333344445555"
A100_PLAIN_UUID = "GPU-a100a100-0000-1111-2222-666677778888"


def a100_mig() -> str:
    """A100 80GB with MIG on (3g.40gb, 1g.10gb, and one whose name lacks the profile) + one A100 without MIG."""
    return f"""driver 535.161.08
gpu
name NVIDIA A100-SXM4-80GB
uuid {A100_UUID}
bus 00000000:07:00.0
util err=3
mem 85899345920 21474836480 64424509440
power 250000
power_limit 400000
energy 5000000
temp 40
mem_temp 44
clock_sm 1410
clock_mem 1593
reasons 0
ecc 0 0
remap 0 0 0 0
replay 0
nvlink 12 4095
nvl_crc_flit 7
nvl_crc_data 0
nvl_replay 3
nvl_recovery 0
mig 1 1
mig_max 7
procs 100 1 101 1 200 9
mig_device
name NVIDIA A100-SXM4-80GB MIG 3g.40gb
uuid MIG-11111111-2222-3333-4444-555555555555
gi 1
mem 42144366592 8589934592 33554432000
util err=3
mig_device
name NVIDIA A100-SXM4-80GB MIG 1g.10gb
uuid MIG-66666666-2222-3333-4444-555555555555
gi 9
mem 10468982784 1073741824 9395240960
util err=3
mig_device
name NVIDIA A100-SXM4-80GB MIG Device
uuid MIG-77777777-2222-3333-4444-555555555555
gi 5
mem 21072183296 0 21072183296
attrs 2 20096
util err=3
gpu
name NVIDIA A100-SXM4-80GB
uuid {A100_PLAIN_UUID}
bus 00000000:0F:00.0
util 50 20
mem 85899345920 1073741824 84825604096
power 100000
power_limit 400000
energy 7000
temp 35
clock_sm 1410
clock_mem 1593
reasons 1
ecc 0 0
mig 0 0
"""


RTX_UUID = "GPU-40904090-aaaa-bbbb-cccc-ddddeeeeffff"


def rtx4090() -> str:
    """GeForce RTX 4090: no ECC, energy or memory temperature; PCIe replay counter needs root (NO_PERMISSION)."""
    return f"""driver 550.54.15
gpu
name NVIDIA GeForce RTX 4090
uuid {RTX_UUID}
bus 00000000:01:00.0
util 33 12
mem 25757220864 4294967296 21462253568
power 123456
power_limit 450000
energy err=3
temp 61
clock_sm 2520
clock_mem 10501
reasons 4
ecc err=3
remap err=3
replay err=4
"""
