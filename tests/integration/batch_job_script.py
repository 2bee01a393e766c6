"""A short evaluation job for tests/integration/test_batch_pushgateway.py: scores ``n``
synthetic items (item i is "correct" when i % every == 0) and pushes through BatchJob;
``--fail`` raises inside the job after counting, like a crashed run; ``--clock`` is the
unix time the job reads (its success timestamp), so the test knows it exactly."""

import argparse
import time
from types import SimpleNamespace

from obsctl.exporters.training import batch
from obsctl.exporters.training.batch import BatchJob

parser = argparse.ArgumentParser()
parser.add_argument("--gateway", required=True)
parser.add_argument("--run", required=True)
parser.add_argument("--n", type=int, required=True)
parser.add_argument("--every", type=int, required=True)
parser.add_argument("--fail", action="store_true")
parser.add_argument("--clock", type=float, required=True)
args = parser.parse_args()
batch.time = SimpleNamespace(time=lambda: args.clock, monotonic=time.monotonic)  # the injected clock

with BatchJob("qa-eval", gateway=args.gateway, instance="ci-runner", labels={"run": args.run}) as job:
    correct = 0
    for i in range(args.n):
        job.workload.count_samples(1)
        job.workload.count_tokens(10)
        correct += i % args.every == 0
    if args.fail:
        raise SystemExit("evaluation crashed")
    job.workload.set_quality_score("accuracy", correct / args.n)
