"""One process per data-parallel rank: a real Lightning DDP run (2 CPU processes, gloo) with
ObsctlCallback in multiprocess mode. The aggregate counts every sample once (each rank its
own shard) and each optimizer step once (rank 0 counts steps), not once per rank."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from obsctl.exporters.sdk import multiprocess_registry, prepare_multiprocess_dir

SCRIPT = Path(__file__).resolve().parent / "ddp_lightning_script.py"


def test_ddp_ranks_add_samples_and_count_steps_once(tmp_path):
    n, batch = 40, 4
    directory = prepare_multiprocess_dir(tmp_path / "mp")
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory), "MASTER_ADDR": "127.0.0.1",
           "OMP_NUM_THREADS": "1", "PL_DISABLE_FORK": "1"}
    proc = subprocess.run([sys.executable, str(SCRIPT), str(n), str(batch), str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    global_step = int(re.search(r"GLOBAL_STEP=(\d+)", proc.stdout).group(1))
    assert global_step == -(-(n // 2) // batch)  # each rank's shard of 20 in batches of 4
    pids = {p.name.split("_")[-1] for p in directory.glob("counter_*.db")}
    assert len(pids) == 2, f"counter files of {pids}: both ranks wrote"
    values = {s.name: s.value for m in multiprocess_registry(directory).collect() for s in m.samples
              if s.labels.get("workload") == "ddp-train" and "le" not in s.labels}
    assert values["obsctl_samples_total"] == n
    assert values["obsctl_steps_total"] == global_step
    assert values["obsctl_step_duration_seconds_count"] == global_step
