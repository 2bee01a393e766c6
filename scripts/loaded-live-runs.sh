#!/usr/bin/env bash
# Consecutive runs of the live tier (pytest -m integration) with the machine loaded: stress-ng
# keeps every core busy for the whole series (two CPU hogs on this 2-core machine), and
# STREAMS series run side by side (each a load on the other). One line per run in
# OUTDIR/runs.tsv (stream, run, start, seconds, result, failed tests, 1-minute load), each
# run's output in OUTDIR/<stream>-<run>.log.
#
# Usage: scripts/loaded-live-runs.sh RUNS_PER_STREAM [STREAMS] [OUTDIR]
# Run it from a checkout with its own .venv (make venv) so edits elsewhere do not leak in.
set -uo pipefail

runs=${1:?runs per stream}
streams=${2:-1}
out=${3:-loaded-runs}
mkdir -p "$out"
command -v stress-ng >/dev/null || { echo "stress-ng is not installed (apt-get install stress-ng)" >&2; exit 2; }
stress-ng --cpu "$(nproc)" --quiet &
hog=$!
trap 'kill $hog 2>/dev/null' EXIT
printf 'stream\trun\tstart\tseconds\tresult\tfailed\tload1\n' > "$out/runs.tsv"

stream() {
  local s=$1 i start t0 rc summary failed
  for ((i = 1; i <= runs; i++)); do
    start=$(date -u +%H:%M:%S); t0=$(date +%s)
    .venv/bin/python -m pytest -q -p no:cacheprovider -m integration > "$out/$s-$i.log" 2>&1
    rc=$?
    summary=$(tail -n 1 "$out/$s-$i.log" | sed 's/=//g; s/^ *//; s/ *$//')
    failed=$(grep -E '^(FAILED|ERROR) ' "$out/$s-$i.log" | cut -d' ' -f2 | tr '\n' ' ')
    printf '%s\t%d\t%s\t%d\t%s (rc %d)\t%s\t%s\n' "$s" "$i" "$start" "$(( $(date +%s) - t0 ))" "$summary" "$rc" "${failed:--}" \
      "$(cut -d' ' -f1 /proc/loadavg)" >> "$out/runs.tsv"
  done
}

for ((s = 1; s <= streams; s++)); do
  stream "$s" &
  sleep 20  # the streams' session fixtures do not start in the same second
done
wait $(jobs -p | grep -v "^$hog$")
