"""Benchmark of the workload SDK's hot calls, single-process vs multiprocess mode (prints figures).

Each mode runs in its own child process (prometheus_client picks its value store at
import): ``count_tokens``, ``with step()`` and ``with request()`` per call in microseconds,
as the median of ``--repeats`` timed loops of ``--calls`` calls, and the cost of one
aggregate scrape (``multiprocess_registry`` + exposition) over ``--workers`` processes'
files. The reference in the same run is a bare ``prometheus_client.Counter.inc()`` of the
same mode, so the ratios say what the SDK adds over the library.

    python bench/bench_sdk.py [--calls 20000] [--repeats 5] [--workers 8]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap

CHILD = textwrap.dedent("""
    import json, statistics, sys, time
    from prometheus_client import CollectorRegistry, Counter, generate_latest
    from obsctl.exporters import sdk
    calls, repeats, workers, mp = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
    wl = sdk.Workload("bench", labels={"model": "m"})
    bare = Counter("bench_bare", "reference", registry=CollectorRegistry())

    def per_call_us(fn):
        runs = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            runs.append((time.perf_counter() - t0) / calls * 1e6)
        return statistics.median(runs)

    def step():
        with wl.step(samples=8, tokens=1024):
            pass

    def request():
        with wl.request():
            pass

    out = {"bare_counter_inc": per_call_us(bare.inc), "count_tokens": per_call_us(lambda: wl.count_tokens(1)),
           "step": per_call_us(step), "request": per_call_us(request)}
    if mp:
        import multiprocessing
        def work(_):
            w = sdk.Workload("bench", labels={"model": "m"})
            w.count_tokens(1); w.set_queue_depth(1)
            with w.request():
                pass
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            pool.map(work, range(workers * 4))
        reg = sdk.multiprocess_registry()
        t0 = time.perf_counter()
        for _ in range(repeats * 4):
            generate_latest(reg)
        out["aggregate_scrape_ms"] = (time.perf_counter() - t0) / (repeats * 4) * 1e3
    print(json.dumps(out))
""")


def run(mode_mp: bool, args) -> dict:
    env = {k: v for k, v in os.environ.items() if k.upper() != "PROMETHEUS_MULTIPROC_DIR"}
    with tempfile.TemporaryDirectory() as directory:
        if mode_mp:
            env["PROMETHEUS_MULTIPROC_DIR"] = directory
        out = subprocess.run([sys.executable, "-c", CHILD, str(args.calls), str(args.repeats), str(args.workers),
                              "1" if mode_mp else "0"], env=env, capture_output=True, text=True, check=True, timeout=600)
    return json.loads(out.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--workers", type=int, default=8)
    args = parser.parse_args()
    results = {"single": run(False, args), "multiprocess": run(True, args)}
    print(f"{'call':<20}{'single us':>12}{'x bare':>8}{'multiproc us':>15}{'x bare':>8}")
    for call in ("bare_counter_inc", "count_tokens", "step", "request"):
        s, m = results["single"], results["multiprocess"]
        print(f"{call:<20}{s[call]:>12.2f}{s[call] / s['bare_counter_inc']:>8.1f}"
              f"{m[call]:>15.2f}{m[call] / m['bare_counter_inc']:>8.1f}")
    print(f"aggregate scrape over {args.workers} workers' files: {results['multiprocess']['aggregate_scrape_ms']:.2f} ms")
    print(f"(per call: median of {args.repeats} loops of {args.calls} calls)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
