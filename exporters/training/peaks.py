"""Dense peak FLOP/s per GPU by model (the name NVML reports) and compute dtype, for MFU.

Model FLOPs utilization (MFU, Chowdhery et al. 2022, "PaLM", appendix B) is the model
FLOP/s a job achieves (FLOPs per token or per sample x throughput) over the peak FLOP/s
of its accelerators. The peak is the **dense** tensor-core figure for the dtype the model
computes in: the vendors' headline tensor figures assume 2:4 structured sparsity, which
training does not use, so those are halved here (the datasheets print the dense figure
as half of the starred sparse one). ``fp32`` is the plain FP32 (non-tensor) rate; ``tf32``
the FP32-input tensor rate. A missing entry means the GPU has no such tensor path (T4 has
no bf16, A100 no fp8): MFU is then absent rather than guessed.

Sources (NVIDIA product datasheets, boost clocks, per GPU):

* H100 SXM5 / PCIe / NVL: "NVIDIA H100 Tensor Core GPU" datasheet (SXM: FP32 67 TF, TF32
  989*, BF16/FP16 1,979*, FP8 3,958*; PCIe: 51, 756*, 1,513*, 3,026*; NVL: 60, 835*,
  1,671*, 3,341*; * with sparsity).
* H200 SXM / NVL: "NVIDIA H200 Tensor Core GPU" datasheet (SXM as H100 SXM; NVL as H100 NVL).
* B200: "NVIDIA HGX B200" datasheet, 8-GPU figures / 8 (FP32 600 TF, TF32 18 PF*,
  BF16/FP16 36 PF*, FP8 72 PF*).
* A100 SXM4 / PCIe, 40 and 80 GB: "NVIDIA A100 Tensor Core GPU" datasheet (FP32 19.5 TF,
  TF32 156, BF16/FP16 312 dense; no FP8).
* L40S: "NVIDIA L40S" datasheet (FP32 91.6 TF, TF32 183, BF16/FP16 362.05, FP8 733 dense).
* L4: "NVIDIA L4 Tensor Core GPU" datasheet (FP32 30.3 TF, TF32 120*, BF16/FP16 242*, FP8 485*).
* A10: "NVIDIA A10 Tensor Core GPU" datasheet (FP32 31.2 TF, TF32 62.5, BF16/FP16 125 dense).
* T4: "NVIDIA T4 Tensor Core GPU" datasheet (FP32 8.1 TF, FP16 mixed precision 65 TF).
* V100 SXM2 / PCIe: "NVIDIA Tesla V100" datasheet (SXM2: FP32 15.7 TF, tensor FP16 125;
  PCIe: 14, 112).

Not listed: GPUs without a vendor datasheet giving tensor figures (AWS's A10G among
them) and consumer cards; give such a class ``mfu.peak_flops_per_second`` in the spec.
Assumptions: boost clocks (sustained clocks under power or thermal limits are lower, so
a real job's ceiling is below 100 %); one model name = one SKU's figures.
"""

from __future__ import annotations

DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8")

T = 1e12


def _p(fp32: float, tf32: float | None, bf16: float | None, fp16: float | None, fp8: float | None) -> dict[str, float]:
    # Arguments in dense TFLOP/s; None: no such path on this GPU.
    values = dict(zip(DTYPES, (fp32, tf32, bf16, fp16, fp8), strict=True))
    return {dtype: tflops * T for dtype, tflops in values.items() if tflops is not None}


_H100_SXM = _p(67, 989 / 2, 1979 / 2, 1979 / 2, 3958 / 2)
_H100_PCIE = _p(51, 756 / 2, 1513 / 2, 1513 / 2, 3026 / 2)
_H100_NVL = _p(60, 835 / 2, 1671 / 2, 1671 / 2, 3341 / 2)
_A100 = _p(19.5, 156, 312, 312, None)
_V100_SXM2 = _p(15.7, None, None, 125, None)
_V100_PCIE = _p(14, None, None, 112, None)

#: GPU model name as NVML reports it (``obsctl_gpu_info{model}``) -> {dtype: dense peak FLOP/s}.
DENSE_PEAK_FLOPS: dict[str, dict[str, float]] = {
    "NVIDIA H100 80GB HBM3": _H100_SXM,
    "NVIDIA H100 PCIe": _H100_PCIE,
    "NVIDIA H100 NVL": _H100_NVL,
    "NVIDIA H200": _H100_SXM,
    "NVIDIA H200 NVL": _H100_NVL,
    "NVIDIA B200": _p(75, 18000 / 8 / 2, 36000 / 8 / 2, 36000 / 8 / 2, 72000 / 8 / 2),
    "NVIDIA A100-SXM4-80GB": _A100,
    "NVIDIA A100-SXM4-40GB": _A100,
    "NVIDIA A100 80GB PCIe": _A100,
    "NVIDIA A100-PCIE-40GB": _A100,
    "NVIDIA L40S": _p(91.6, 183, 362.05, 362.05, 733),
    "NVIDIA L4": _p(30.3, 120 / 2, 242 / 2, 242 / 2, 485 / 2),
    "NVIDIA A10": _p(31.2, 62.5, 125, 125, None),
    "Tesla T4": _p(8.1, None, None, 65, None),
    "Tesla V100-SXM2-16GB": _V100_SXM2,
    "Tesla V100-SXM2-32GB": _V100_SXM2,
    "Tesla V100-PCIE-16GB": _V100_PCIE,
    "Tesla V100-PCIE-32GB": _V100_PCIE,
}


def dense_peak_flops(model: str, dtype: str) -> float | None:
    """Dense peak FLOP/s of one GPU ``model`` (NVML name) in ``dtype``; None if not known.

    Raises:
        ValueError: ``dtype`` is not one of fp32, tf32, bf16, fp16, fp8.
    """
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    return DENSE_PEAK_FLOPS.get(model, {}).get(dtype)


def table_markdown() -> str:
    """The table as Markdown, dense TFLOP/s (docs/training.md holds this text; a test compares)."""
    lines = ["| GPU model (NVML name) | " + " | ".join(DTYPES) + " |", "|---|" + "---:|" * len(DTYPES)]
    for model, peaks in DENSE_PEAK_FLOPS.items():
        cells = [f"{peaks[d] / T:g}" if d in peaks else "-" for d in DTYPES]
        lines.append(f"| `{model}` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
