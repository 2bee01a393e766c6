"""Golden record of the obsctl CLI: every command's text output, ``--output json`` output
and exit code over one deterministic fixture matrix.

The record is taken by running the CLI in subprocesses (``python -m obsctl``) with a
python executable and environment given by the caller, so the same matrix can be run
against any copy of the code (an installed wheel of an earlier commit, or the working
tree) and the two records diffed.

The fixture matrix:

- a real Prometheus (Debian package ``prometheus``) on 127.0.0.1 on a free port, serving
  four days of history backfilled with ``promtool tsdb create-blocks-from openmetrics``
  from an OpenMetrics file generated here with fixed seeds, at a fixed date in the past
  (nothing depends on today's date);
- three inference classes, two signals each (``tokens_per_second``, throughput, and
  ``request_error_ratio``, quality, the guard):

  - ``chat``: 1000 tokens/s + AR(1) noise, a +20 % step (1200) from the initiative start
    at day 3 on (an IMPROVED verdict);
  - ``embed``: 500 tokens/s + AR(1) noise throughout (no change);
  - ``rerank``: 300 tokens/s + AR(1) noise, both series stop at day 3 (NO_DATA after);

  the error ratio is 0.01 + small AR(1) noise for every class, unchanged;
- a spec written here (the structure of examples/obsctl.yaml, only what the data fill),
  plus variants: an unknown key, the deprecated ``verification.batches``, and a
  Prometheus URL where nothing listens.

Every command gets explicit times (``--end``, ``--started-at``, ``--start``), so the
verdicts and statistics are the same on every run. Volatile parts of the output are
normalised: the temporary folder becomes ``<TMP>``, loopback ports ``<PORT>``, and wall
clock times written by a command (baseline ids, ``verified_at``, ...) become
``<NOW:case>`` after the case whose command wrote them (each command runs in a second of
its own, so a time names its case unambiguously and the same id gets the same
placeholder wherever it reappears). Two more things that are not behaviour are normalised:

- day counts from the run to a fixed date of the spec (the target's deadline: ``days_left``
  in json, ``N day(s) left`` in text) become ``<DAYS:2030-12-31>``, only where the number
  is what the case's own clock gives (else the number stays and the diff shows it), so the
  record does not age;
- a target's ``elapsed`` share in json below 1e-4 (its anchor is taken by the snapshot
  case, a wall-clock moment or two before ``target show``) becomes ``<ELAPSED:~0>``;
- floats in ``--output json`` stdout are written with :data:`FLOAT_DIGITS` significant
  digits, when recording and again when comparing (:func:`diff`): the last digits of a
  double move with the order of a computation (a reordered sum, another numpy code path)
  without any change a user can see. Text output, whose digits are the CLI's own
  formatting, is compared as printed.

Each case runs twice, text then ``--output json``, the text run on a copy of the store
that is thrown away afterwards: the json run sees exactly the state the previous cases
left, and its effects are what later cases build on.

No pytest here: :func:`record` is the whole API (see scripts/cli_golden.py and
tests/integration/test_cli_golden.py).
"""

from __future__ import annotations

import datetime as dt
import difflib
import json
import math
import os
import random
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

# Fixed history: 2025-11-03T00:00:00Z (a Monday) for four days at one sample a minute.
T0 = int(dt.datetime(2025, 11, 3, tzinfo=dt.UTC).timestamp())
DAY = 86400
HOUR = 3600
STEP = 60
DAYS = 4
START = T0 + 3 * DAY  # the initiatives' start, the change
SEED = 20251103
# The target's deadline in the spec: the CLI counts days from now to it.
DEADLINE = dt.date(2030, 12, 31)
# Significant digits of the floats compared in --output json.
FLOAT_DIGITS = 10

TOKENS = "obsctl_golden_tokens_per_second"
ERRORS = "obsctl_golden_request_error_ratio"
CLASSES = ("chat", "embed", "rerank")

COMMAND_TIMEOUT = 240


def iso(ts: int) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- data ------------------------------------------------------------------------------


def _ar1(rng: random.Random, n: int, sd: float, phi: float = 0.8) -> list[float]:
    # Autocorrelated noise, like a rate over a window evaluated every step.
    out, e = [], 0.0
    for _ in range(n):
        e = phi * e + rng.gauss(0.0, sd)
        out.append(e)
    return out


def history() -> dict[str, dict[str, dict[int, float]]]:
    """``{metric: {class: {unix_ts: value}}}`` of the backfilled history (fixed seed)."""
    rng = random.Random(SEED)
    n = DAYS * DAY // STEP + 1
    stamps = [T0 + i * STEP for i in range(n)]
    level = {"chat": 1000.0, "embed": 500.0, "rerank": 300.0}
    sd = {"chat": 20.0, "embed": 10.0, "rerank": 6.0}
    tokens: dict[str, dict[int, float]] = {}
    errors: dict[str, dict[int, float]] = {}
    for cls in CLASSES:
        noise, err_noise = _ar1(rng, n, sd[cls]), _ar1(rng, n, 0.0005)
        for ts, e, ee in zip(stamps, noise, err_noise, strict=True):
            if cls == "rerank" and ts > START:
                continue  # the series vanish at the change
            base = level[cls] * (1.2 if cls == "chat" and ts > START else 1.0)
            tokens.setdefault(cls, {})[ts] = round(base + e, 6)
            errors.setdefault(cls, {})[ts] = round(max(0.0, 0.01 + ee), 8)
    return {TOKENS: tokens, ERRORS: errors}


def write_openmetrics(data: dict[str, dict[str, dict[int, float]]], path: Path) -> None:
    lines = []
    for metric, per_class in data.items():
        lines += [f"# TYPE {metric} gauge", f"# HELP {metric} Synthetic signal of the obsctl CLI golden record."]
        for cls, values in per_class.items():
            for ts, value in sorted(values.items()):
                lines.append(f'{metric}{{job="golden",workload="{cls}"}} {value!r} {ts}')
    lines.append("# EOF")
    path.write_text("\n".join(lines) + "\n")


# --- Prometheus ------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Prometheus:
    """A Prometheus serving ``data_dir`` on 127.0.0.1 with no scrape targets."""

    workdir: Path
    data_dir: Path
    port: int = 0
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> None:
        self.port = free_port()
        config = self.workdir / "prometheus.yml"
        config.write_text("global: {scrape_interval: 1m}\nscrape_configs: []\n")
        argv = [
            shutil.which("prometheus") or "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={self.data_dir}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--storage.tsdb.retention.time=36500d",
            "--query.lookback-delta=5m",
        ]
        from support.servers import state_problem

        problem = state_problem(argv)
        if problem:
            raise RuntimeError(problem)
        # Open for the server's lifetime; closed in stop().
        self._log = open(self.workdir / "prometheus.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, cwd=self.workdir)
        from obsctl.errors import ObsctlError
        from support.servers import wait_ready

        try:  # a deadline on progress: a start-up slowed down by a busy machine is waited for
            wait_ready(f"{self.url}/-/ready", timeout, self.proc)
        except ObsctlError as exc:
            log = (self.workdir / "prometheus.log").read_text()[-2000:]
            self.stop()
            raise RuntimeError(f"prometheus did not become ready: {exc}: {log}") from None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if getattr(self, "_log", None):
            self._log.close()


# --- spec ------------------------------------------------------------------------------

SPEC = """\
# obsctl spec of the CLI golden record (the structure of examples/obsctl.yaml).
version: 1

prometheus:
  url: {url}
  timeout_seconds: {timeout}
{extra_prometheus}
cadence: weekly
store: {store}

workload_classes:
  - name: chat
    kind: inference
    description: Chat completions served online
    selector: {{job: golden, workload: chat}}
  - name: embed
    kind: inference
    description: Sentence embeddings served online
    selector: {{job: golden, workload: embed}}
  - name: rerank
    kind: inference
    description: Search reranking, retired at the change
    selector: {{job: golden, workload: rerank}}

signals:
  - name: tokens_per_second
    category: throughput
    query: sum({tokens}{{$selector}})
    unit: tokens/s
    direction: higher_is_better
    tolerance_ratio: 0.15
{extra_signal}
  - name: request_error_ratio
    category: quality
    query: avg({errors}{{$selector}})
    unit: ratio
    direction: lower_is_better
    tolerance_ratio: 0.5

targets:
  - workload_class: chat
    signal: tokens_per_second
    relative: 0.15
    driver: Serve the chat demand of next year on the same GPUs
    deadline: {deadline}

verification:
  window: 6h
  step: 1m
  guards: [quality]
  memory_history: 2d
  confidence: 0.95
  min_effect_ratio: 0.02
  min_coverage_ratio: 0.9
{extra_verification}
comparison:
  design: before-after
  timezone: UTC
"""


def write_spec(path: Path, url: str, store: str = "store", timeout: float = 10, extra_prometheus: str = "",
               extra_signal: str = "", extra_verification: str = "") -> Path:
    path.write_text(SPEC.format(url=url, timeout=timeout, store=store, tokens=TOKENS, errors=ERRORS, deadline=DEADLINE.isoformat(),
                                extra_prometheus=extra_prometheus, extra_signal=extra_signal,
                                extra_verification=extra_verification))
    return path


# --- running ---------------------------------------------------------------------------


@dataclass
class Runner:
    """How to run the CLI: ``python -m obsctl ARGS`` with ``env`` (default: this process's)."""

    python: str
    env: dict[str, str] | None = None

    def environment(self) -> dict[str, str]:
        env = dict(os.environ if self.env is None else self.env)
        for key in list(env):
            if key.startswith("OBSCTL_"):
                del env[key]  # the spec and defaults come from the argv only
        # Same wrapping, zone, encoding and thread count on every run.
        env.update({"TZ": "UTC", "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8", "COLUMNS": "100", "PYTHONHASHSEED": "0",
                    "MPLBACKEND": "Agg", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                    "PYTHONWARNINGS": "ignore", "NO_COLOR": "1"})
        return env


@dataclass
class Case:
    """One command; ``files`` lists (and ``read`` returns the text of) what it wrote under ``out``."""

    name: str
    args: list[str]
    out: Path | None = None
    read: Callable[[Path], dict[str, str]] | None = None


@dataclass
class Fixture:
    tmp: Path
    spec: Path
    store: Path
    prometheus: Prometheus | None = None
    unreachable_port: int = 0
    # (case name, first second, last second) of each command run, in order.
    clocks: list[tuple[str, int, int]] = field(default_factory=list)


def setup(tmp: Path) -> Fixture:
    """Backfill the history, start Prometheus and write the specs under ``tmp``."""
    prom_dir = tmp / "prometheus"
    prom_dir.mkdir(parents=True)
    om = prom_dir / "history.om"
    write_openmetrics(history(), om)
    data_dir = prom_dir / "data"
    subprocess.run([shutil.which("promtool") or "promtool", "tsdb", "create-blocks-from", "openmetrics", str(om), str(data_dir)],
                   check=True, capture_output=True, timeout=300)
    prom = Prometheus(workdir=prom_dir, data_dir=data_dir)
    prom.start()
    spec_dir = tmp / "spec"
    spec_dir.mkdir()
    fx = Fixture(tmp=tmp, spec=spec_dir / "obsctl.yaml", store=spec_dir / "store", prometheus=prom)
    write_spec(fx.spec, prom.url)
    write_spec(spec_dir / "unknown-key.yaml", prom.url, extra_signal="    colour: blue")
    write_spec(spec_dir / "batches.yaml", prom.url, extra_verification="  batches: 10")
    fx.unreachable_port = free_port()
    write_spec(spec_dir / "unreachable.yaml", f"http://127.0.0.1:{fx.unreachable_port}", store="store-unreachable",
               timeout=1, extra_prometheus="  deadline_seconds: 2")
    return fx


def _markdown(out: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(out.glob("*.md"))}


def _stale_rules(fx: Fixture) -> Path:
    """A copy of the generated rules with one file edited (what ``--check`` must flag)."""
    stale = fx.tmp / "out" / "rules-stale"
    shutil.copytree(fx.tmp / "out" / "rules-text", stale)
    first = min(p for p in stale.rglob("*") if p.is_file())
    first.write_text(first.read_text() + "# edited by hand\n")
    return stale


def cases(fx: Fixture) -> list[Case | Callable[[], None]]:
    """The matrix, in run order; a callable is a set-up step between cases."""
    spec = ["--spec", str(fx.spec)]
    spec_dir = fx.spec.parent
    out = fx.tmp / "out"
    chat = "batch-size-tuning-" + iso(START)[:10].replace("-", "")
    embed = "int8-quantization-" + iso(START)[:10].replace("-", "")
    rerank = "retire-rerank-" + iso(START)[:10].replace("-", "")
    after = iso(START + 6 * HOUR)
    start = ["--started-at", iso(START)]
    return [
        Case("check/valid", ["check", *spec]),
        Case("check/unknown-key", ["check", "--spec", str(spec_dir / "unknown-key.yaml")]),
        Case("check/deprecated-batches", ["check", "--spec", str(spec_dir / "batches.yaml")]),
        Case("rules-generate", ["rules", "generate", *spec, "--out", "{out}"], out=out / "rules"),
        lambda: _stale_rules(fx),
        Case("rules-check/up-to-date", ["rules", "generate", *spec, "--out", str(out / "rules-text"), "--check"]),
        Case("rules-check/out-of-date", ["rules", "generate", *spec, "--out", str(out / "rules-stale"), "--check"]),
        Case("dashboards-build", ["dashboards", "build", *spec, "--out", "{out}"], out=out / "dashboards"),
        Case("prometheus-unreachable", ["snapshot-baseline", "--spec", str(spec_dir / "unreachable.yaml"),
                                        "--class", "chat", "--end", iso(START)]),
        Case("snapshot-baseline/refused", ["snapshot-baseline", *spec, "--class", "rerank", "--end", after]),
        Case("snapshot-baseline/ok", ["snapshot-baseline", *spec, "--end", iso(START)]),
        Case("baseline-list", ["baseline", "list", *spec]),
        Case("baseline-show", ["baseline", "show", *spec, "--class", "chat", "--signal", "tokens_per_second"]),
        Case("target-show", ["target", "show", *spec]),
        Case("initiative-start/ok", ["initiative", "start", *spec, "--name", "batch size tuning", "--lever", "batch-size",
                                     "--class", "chat", "--signal", "tokens_per_second", "--expected-impact", "0.2",
                                     *start, "--notes", "max_num_seqs 64 -> 128"]),
        Case("initiative-start/embed", ["initiative", "start", *spec, "--name", "int8 quantization", "--lever", "quantization",
                                        "--class", "embed", "--signal", "tokens_per_second", *start]),
        Case("initiative-start/rerank", ["initiative", "start", *spec, "--name", "retire rerank", "--lever", "right-sizing",
                                         "--class", "rerank", "--signal", "tokens_per_second", *start]),
        Case("initiative-start/refused-second", ["initiative", "start", *spec, "--name", "quantize", "--lever", "quantization",
                                                 "--class", "chat", "--signal", "tokens_per_second", *start]),
        Case("initiative-list", ["initiative", "list", *spec]),
        Case("plan", ["plan", *spec, "--class", "chat", "--signal", "tokens_per_second", "--effect", "0.05"]),
        Case("verify/improved", ["verify", *spec, "--class", "chat", "--end", after]),
        Case("verify/no-change", ["verify", *spec, "--initiative", embed, "--start", iso(START), "--end", after]),
        Case("verify/no-data", ["verify", *spec, "--initiative", rerank, "--start", iso(START), "--end", after]),
        Case("verify/usage-error", ["verify", *spec, "--class", "nosuch", "--end", after]),
        Case("baseline-promote", ["baseline", "promote", *spec, "--initiative", chat]),
        Case("report", ["report", *spec, "--initiative", chat, "--out", "{out}"], out=out / "report", read=_markdown),
        Case("initiative-close", ["initiative", "close", *spec, "--initiative", embed, "--note", "no measurable effect"]),
        Case("initiative-list/final", ["initiative", "list", *spec]),
        Case("baseline-list/history-final", ["baseline", "list", *spec, "--history"]),
    ]


def _wait_next_second(fx: Fixture) -> None:
    # Each command starts in a second after the previous one ended, so a wall-clock time
    # names the command that wrote it.
    last = fx.clocks[-1][2] if fx.clocks else 0
    while int(time.time()) <= last:
        time.sleep(0.05)


def _run(runner: Runner, fx: Fixture, name: str, args: list[str]) -> dict:
    _wait_next_second(fx)
    first = int(time.time())
    argv = [runner.python, "-m", "obsctl", *args]
    proc = subprocess.run(argv, capture_output=True, text=True, env=runner.environment(), cwd=fx.tmp,
                          timeout=COMMAND_TIMEOUT, stdin=subprocess.DEVNULL, check=False)
    fx.clocks.append((name, first, int(time.time())))
    return {"argv": ["obsctl", *args], "exit_code": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}


def run_cases(runner: Runner, fx: Fixture) -> dict[str, dict]:
    """Run the matrix (text, then json on the state before the text run); raw output."""
    results: dict[str, dict] = {}
    for item in cases(fx):
        if callable(item):
            item()
            continue
        for output in ("text", "json"):
            name = f"{item.name}/{output}"
            args = [str(fx.tmp / "out" / f"{item.out.name}-{output}") if a == "{out}" else a for a in item.args]
            if output == "json":
                args += ["--output", "json"]
            saved = fx.tmp / "store-before-text"
            if output == "text" and fx.store.exists():
                shutil.copytree(fx.store, saved)
            result = _run(runner, fx, name, args)
            if item.out is not None:
                out = fx.tmp / "out" / f"{item.out.name}-{output}"
                result["files"] = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) if out.exists() else []
                if item.read is not None and out.exists():
                    result["file_text"] = item.read(out)
            if output == "text":
                # The text run's effects are dropped: the json run sees the same store.
                shutil.rmtree(fx.store, ignore_errors=True)
                if saved.exists():
                    saved.rename(fx.store)
            results[name] = result
    return results


# --- normalising -----------------------------------------------------------------------

_PORT = re.compile(r"(127\.0\.0\.1|localhost|\[::1\]):\d+")
_ISO = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?")
_COMPACT = re.compile(r"\d{8}T\d{6}Z?")
_EPOCH = re.compile(r"(?<![\d.])1[6-9]\d{8}(?:\.\d+)?(?![\d])")
# How long the client's retries took before it gave up (wall-clock, not a result).
_RETRY_TIME = re.compile(r"(attempts? in )\d+(?:\.\d+)?s\b")
# A day count: ``1490 day(s) left`` in text, ``"days_left": 1489.69`` in json.
_DAYS_TEXT = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?= days?\b| day\(s\))")
_ELAPSED_JSON = re.compile(r'("elapsed": )(\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)(?![\w.])')
_DAYS_JSON = re.compile(r'("\w*days\w*": )(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)(?![\w.])')
# JSON lexing: a string (kept whole) or a number.
_JSON_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?![\w.])')


def _when(text: str) -> int | None:
    """Unix second of a timestamp found in output (UTC when no offset is written)."""
    try:
        if _COMPACT.fullmatch(text):
            parsed = dt.datetime.strptime(text.rstrip("Z"), "%Y%m%dT%H%M%S")
        elif _EPOCH.fullmatch(text):
            return int(float(text))
        else:
            parsed = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return int(parsed.timestamp())


def _days_between(fx: Fixture, case: str | None) -> list[tuple[str, float, float]]:
    """``(date, low, high)``: the days from ``case``'s run (any instant in it) to each fixed date."""
    spans = [(first, last + 1) for name, first, last in fx.clocks if name == case]
    out = []
    for date in (DEADLINE,):
        at = int(dt.datetime.combine(date, dt.time(0, 0), tzinfo=dt.UTC).timestamp())
        for first, end in spans:
            out.append((date.isoformat(), (at - end) / DAY, (at - first) / DAY))
    return out


def normaliser(fx: Fixture, case: str | None = None) -> Callable[[str], str]:
    """Text normaliser; ``case``: the case whose output it is (for its day counts)."""
    tmp_forms = sorted({str(fx.tmp), os.path.realpath(fx.tmp)}, key=len, reverse=True)
    days = _days_between(fx, case)

    def whole_days(match: re.Match) -> str:
        # A count printed in whole days, either way of the date, rounded any way.
        value = float(match.group(0))
        for date, low, high in days:
            low, high = sorted((abs(low), abs(high))) if low * high > 0 else (0.0, max(abs(low), abs(high)))
            if math.floor(low) <= value <= math.ceil(high):
                return f"<DAYS:{date}>"
        return match.group(0)

    def fractional_days(match: re.Match) -> str:
        value = float(match.group(2))
        for date, low, high in days:
            if low - 1e-6 <= value <= high + 1e-6:
                return f"{match.group(1)}<DAYS:{date}>"
        return match.group(0)

    def case_at(second: int) -> str | None:
        for name, first, last in fx.clocks:
            if first <= second <= last:
                return name
        return None

    def wall(match: re.Match) -> str:
        second = _when(match.group(0))
        name = case_at(second) if second is not None else None
        return f"<NOW:{name}>" if name else match.group(0)

    def normalise(text: str) -> str:
        for form in tmp_forms:
            text = text.replace(form, "<TMP>")
        text = _PORT.sub(lambda m: f"{m.group(1)}:<PORT>", text)
        text = _RETRY_TIME.sub(r"\1<SECONDS>s", text)
        text = _ISO.sub(wall, text)
        text = _COMPACT.sub(wall, text)
        text = _EPOCH.sub(wall, text)
        text = _ELAPSED_JSON.sub(lambda m: f"{m.group(1)}<ELAPSED:~0>" if float(m.group(2)) < 1e-4 else m.group(0), text)
        if days:
            text = _DAYS_JSON.sub(fractional_days, text)
            text = _DAYS_TEXT.sub(whole_days, text)
        return text

    return normalise


def round_floats(text: str, digits: int = FLOAT_DIGITS) -> str:
    """JSON text with every float written to ``digits`` significant digits (Python's
    shortest form of the rounded value); strings, integers and layout are kept as they are."""

    def token(match: re.Match) -> str:
        lexeme = match.group(0)
        if lexeme.startswith('"') or not any(c in lexeme for c in ".eE"):
            return lexeme
        return repr(float(f"{float(lexeme):.{digits}g}"))

    return _JSON_TOKEN.sub(token, text)


def _json_output(case: dict) -> bool:
    argv = case.get("argv") or []
    return any(a == "--output" and b == "json" for a, b in pairwise(argv))


def comparable(case: dict) -> dict:
    """``case`` with the floats of its json stdout rounded (:func:`round_floats`)."""
    if not _json_output(case) or not isinstance(case.get("stdout"), str):
        return case
    return {**case, "stdout": round_floats(case["stdout"])}


def _normalise_tree(value, normalise: Callable[[str], str]):
    if isinstance(value, str):
        return normalise(value)
    if isinstance(value, list):
        return [_normalise_tree(v, normalise) for v in value]
    if isinstance(value, dict):
        return {normalise(k): _normalise_tree(v, normalise) for k, v in value.items()}
    return value


def provenance(runner: Runner) -> str:
    """Where the CLI's ``obsctl`` and ``obsctl.baselining`` come from under ``runner``
    (run from a neutral folder, as the cases are: the copy that will be recorded)."""
    code = "import obsctl, obsctl.baselining.verify as v; print(obsctl.__file__); print(v.__file__)"
    with tempfile.TemporaryDirectory() as cwd:
        proc = subprocess.run([runner.python, "-c", code], capture_output=True, text=True, env=runner.environment(),
                              cwd=cwd, timeout=60, check=False)
    return (proc.stdout + proc.stderr).strip()


def record(runner: Runner, keep: Path | None = None) -> dict[str, dict]:
    """Set up the matrix in a fresh temporary folder, run every case, return the
    normalised ``{case: {"argv", "exit_code", "stdout", "stderr"[, "files", "file_text"]}}``.

    ``keep``: a folder to copy the temporary folder to for inspection (else deleted)."""
    tmp = Path(tempfile.mkdtemp(prefix="obsctl-golden-"))
    fx = None
    try:
        fx = setup(tmp)
        raw = run_cases(runner, fx)
        return {name: comparable(_normalise_tree(case, normaliser(fx, name))) for name, case in raw.items()}
    finally:
        if fx is not None and fx.prometheus is not None:
            fx.prometheus.stop()
        if keep is not None:
            shutil.copytree(tmp, keep, dirs_exist_ok=True, ignore=shutil.ignore_patterns("data", "*.om"))
        shutil.rmtree(tmp, ignore_errors=True)


# --- comparing -------------------------------------------------------------------------


def render(case: dict) -> list[str]:
    """A case as lines for a readable diff."""
    lines = ["argv: " + json.dumps(case.get("argv")), f"exit_code: {case.get('exit_code')}"]
    for key in ("stdout", "stderr"):
        lines.append(f"--- {key}")
        lines += (case.get(key) or "").splitlines()
    if "files" in case:
        lines.append("--- files")
        lines += case["files"]
    for fname, text in (case.get("file_text") or {}).items():
        lines.append(f"--- file {fname}")
        lines += text.splitlines()
    return lines


def diff(golden: dict[str, dict], current: dict[str, dict]) -> dict[str, str]:
    """``{case: unified diff}`` of every case that differs (added and removed cases too)."""
    out = {}
    for name in sorted(set(golden) | set(current), key=lambda n: (list(golden) + list(current)).index(n)):
        old = render(comparable(golden[name])) if name in golden else []
        new = render(comparable(current[name])) if name in current else []
        if old != new:
            out[name] = "\n".join(difflib.unified_diff(old, new, f"golden/{name}", f"current/{name}", lineterm=""))
    return out


def dump(results: dict[str, dict], path: Path) -> None:
    path.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")


def load(path: Path) -> dict[str, dict]:
    return json.loads(path.read_text())
