"""``obsctl verify``'s concurrent Prometheus calls under faults (baselining/verify.py: the
primary's window, the guards and the alerts query on worker threads; designs/run.py: the
load context's queries 8 at a time), against a real Prometheus through the fault proxy
with a per-request fault (``proxy.only``).

Each fault on one kind of request must read as it did when the calls ran one after the
other: one ``obsctl: error:`` line (the primary's error first, then each guard's, then the
alerts'), its exit code, no traceback or log line from a worker thread, the store byte
for byte unchanged; and the command must not outlive the failure by waiting for requests
still in flight (an error, or Ctrl-C, ends it at once)."""

from __future__ import annotations

import collections
import json
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse

import pytest
import yaml
from click.testing import CliRunner

from obsctl.baselining.commands.cli import verify
from support.faultkit import seed_store, tree_digest, write_fault_spec
from support.history import LATENCY, METRIC, QUALITY
from support.polling import wait_until
from support.servers import free_port

#: Six guard signals of the steady class (quality and saturation categories), sorted by name.
GUARDS = [
    {"name": "quality_min", "category": "quality", "query": f"min({QUALITY}{{$selector}})", "unit": "ratio", "direction": "higher_is_better"},
    {"name": "quality_ratio", "category": "quality", "query": f"avg({QUALITY}{{$selector}})", "unit": "ratio", "direction": "higher_is_better"},
    {"name": "request_seconds", "category": "saturation", "query": f"avg({LATENCY}{{$selector}})", "unit": "s", "direction": "lower_is_better"},
    {"name": "request_seconds_max", "category": "saturation", "query": f"max({LATENCY}{{$selector}})", "unit": "s", "direction": "lower_is_better"},
    {"name": "request_seconds_min", "category": "saturation", "query": f"min({LATENCY}{{$selector}})", "unit": "s", "direction": "lower_is_better"},
    {"name": "request_seconds_sum", "category": "saturation", "query": f"sum({LATENCY}{{$selector}})", "unit": "s", "direction": "lower_is_better"},
]
CONSOLE = [sys.executable, "-c", "from obsctl.cli import main; main()"]


def run(cmd, args):
    return CliRunner().invoke(cmd, [str(a) for a in args])


def promql(path: str) -> str:
    return urllib.parse.parse_qs(urllib.parse.urlsplit(path).query).get("query", [""])[0]


def is_guard(path: str) -> bool:
    return QUALITY in promql(path) or LATENCY in promql(path)


def is_one_guard(path: str) -> bool:  # request_seconds_max only
    return promql(path).startswith(f"max({LATENCY}")


def is_alerts(path: str) -> bool:
    return promql(path).startswith("count_over_time(ALERTS")


def is_primary(path: str) -> bool:
    return promql(path).startswith(f"sum({METRIC}")


def write_guard_spec(path, url, store, guards=GUARDS, **prometheus):
    write_fault_spec(path, url, store, **prometheus)
    spec = yaml.safe_load(path.read_text())
    spec["signals"] += guards
    spec["verification"]["guards"] = ["quality", "saturation"]
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def guard_store(tmp_path_factory, history):
    """A store with baselines of the primary and the six guards (steady) and an open
    initiative, made once through a pass-through proxy; each test works on a copy."""
    return seed_store(tmp_path_factory.mktemp("guard-seeded"), history, write_guard_spec)


@pytest.fixture
def store(tmp_path, guard_store):
    shutil.copytree(guard_store, tmp_path / "store")
    return tmp_path / "store"


@pytest.fixture
def gspec(tmp_path, proxy, store):
    """The guard spec through the proxy (timeout 1 s, deadline 2 s) on a copy of the store."""
    return write_guard_spec(tmp_path / "obsctl.yaml", proxy.url, store)


def verify_args(spec, history, *extra):
    return ["--spec", spec, "--class", "steady", "--end", history.iso(2), *extra]


def interrupt(args: list, ready, proxy) -> tuple[subprocess.Popen, str, str]:
    """Run the console script's ``verify ARGS``, send SIGINT once ``ready()`` holds (its
    calls hang in the proxy), and return ``(process, stdout, stderr)``."""
    # The child gets SIGINT's default disposition whatever the suite inherited: a suite started
    # as a background job has SIGINT ignored, and Python then never raises KeyboardInterrupt.
    p = subprocess.Popen([*CONSOLE, "verify", *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        wait_until(ready, 20, interval=0.02, what=lambda: f"verify's calls to hang in the proxy (seen: {proxy.seen})")
        time.sleep(0.3)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
        return p, out, err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def assert_not_retried(proxy) -> None:
    """No held call was tried again: waiting for the calls after SIGINT would show as their
    retries (an attempt gives up after the 5 s timeout and is retried until the deadline)."""
    attempts = collections.Counter(path for path, _, _ in proxy.seen if proxy.only(path))
    assert set(attempts.values()) <= {1}, f"held calls retried: verify waited for them ({attempts})"


def one_line(stderr: str, proxy_url: str | None = None) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr and "Connection pool is full" not in stderr
    line = lines[0].replace(proxy_url, "URL") if proxy_url else lines[0]
    assert line.startswith("obsctl: error: "), line
    return line


# --- one kind of request faulted --------------------------------------------------------

GUARD_MODES = [
    ("5xx", 3, r"HTTP 503 from /api/v1/query_range"),
    ("trickle", 3, r"no complete answer within 1s \(after 2 attempts in [\d.]+s; deadline 2s\)$"),
    ("deep", 3, r"JSON nested too deeply"),
    ("401", 3, r"HTTP 401 from /api/v1/query_range: the server asks for credentials"),
    ("reset_mid", 3, r"connection reset by the server in the middle of the answer"),
    ("bad_data400", 2, r"Prometheus rejected the query 'max\(obsctl_synthetic_request_seconds"),
]


@pytest.mark.parametrize(("mode", "code", "pattern"), GUARD_MODES, ids=[m[0] for m in GUARD_MODES])
def test_a_fault_on_one_guard_is_one_line_and_keeps_the_store(mode, code, pattern, proxy, gspec, store, history):
    before = tree_digest(store)
    proxy.mode, proxy.only = mode, is_one_guard
    result = run(verify, verify_args(gspec, history, "-o", "json"))
    assert result.exit_code == code, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert re.search(pattern, one_line(result.stderr, proxy.url)), result.stderr
    assert json.loads(result.stdout) == {"error": result.stderr.strip().removeprefix("obsctl: error: "), "exit_code": code}
    assert tree_digest(store) == before
    assert any(is_one_guard(p) for p, _, _ in proxy.seen)


def test_a_fault_on_the_alerts_query_is_one_line(proxy, gspec, store, history):
    before = tree_digest(store)
    proxy.mode, proxy.only = "5xx", is_alerts
    result = run(verify, verify_args(gspec, history))
    assert result.exit_code == 3, result.output
    line = one_line(result.stderr, proxy.url)
    assert "HTTP 503 from /api/v1/query:" in line, line  # an instant query: the alerts'
    assert tree_digest(store) == before


def test_the_primarys_error_comes_before_the_guards(proxy, gspec, store, history):
    """Primary 503, every guard 401 at the same time: the primary's error is the one shown."""
    before = tree_digest(store)

    proxy.route = lambda path: "5xx" if is_primary(path) else "401" if is_guard(path) else None
    result = run(verify, verify_args(gspec, history))
    assert result.exit_code == 3, result.output
    line = one_line(result.stderr, proxy.url)
    assert "HTTP 503 from /api/v1/query_range" in line and "401" not in line, line
    assert tree_digest(store) == before


def test_a_guard_error_comes_before_the_alerts_error(proxy, gspec, store, history):
    proxy.route = lambda path: "401" if is_one_guard(path) else "5xx" if is_alerts(path) else None
    result = run(verify, verify_args(gspec, history))
    assert result.exit_code == 3, result.output
    line = one_line(result.stderr, proxy.url)
    assert "HTTP 401 from /api/v1/query_range" in line, line  # the guard's, not the alerts' 503


def test_no_guards_sends_no_guard_query(proxy, gspec, store, history):
    proxy.mode, proxy.only = "5xx", is_guard
    result = run(verify, verify_args(gspec, history, "--no-guards", "-o", "json"))
    assert result.exit_code == 0, result.output
    res = json.loads(result.stdout)
    assert res["guards_evaluated"] is False and res["guards"] == []
    assert not any(is_guard(p) for p, _, _ in proxy.seen)


@pytest.mark.parametrize("mode", ["deep", "bad_data400", "trickle", "reset_mid"])
def test_a_load_context_fault_costs_its_period_only(mode, proxy, gspec, history):
    t1 = history.at(1)

    def baseline_load(path: str) -> bool:
        q = urllib.parse.parse_qs(urllib.parse.urlsplit(path).query)
        return "process_cpu_seconds_total" in q.get("query", [""])[0] and float(q.get("start", ["inf"])[0]) < t1

    proxy.mode, proxy.only = mode, baseline_load
    result = run(verify, verify_args(gspec, history, "--no-guards", "-o", "json"))
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    notes = json.loads(result.stdout)["design_context"]["notes"]
    assert any(n.startswith("baseline: load context not read (") for n in notes), notes
    assert not any(n.startswith("window: load context not read") for n in notes), notes


# --- many guards: same results, same order as one at a time ----------------------------

def test_six_guards_match_the_sequential_evaluation(proxy, gspec, store, history):
    from obsctl.baselining.decide.verdict import judge_guard
    from obsctl.baselining.evidence import measure_guard
    from obsctl.baselining.guards import guard_baselines
    from obsctl.baselining.statistics.comparison import LookContext
    from obsctl.baselining.store import Store
    from obsctl.promapi import PrometheusClient
    from obsctl.spec import load_spec as load

    result = run(verify, verify_args(gspec, history, "-o", "json"))
    assert result.exit_code in (0, 10, 11), result.output
    assert "Connection pool is full" not in result.stderr
    got = json.loads(result.stdout)
    assert [g["signal"] for g in got["guards"]] == [g["name"] for g in GUARDS]
    # One guard at a time, through the library, on the same window.
    spec = load(str(gspec))
    st = Store(store)
    i = st.initiatives()[0]
    client = PrometheusClient.from_spec(spec)
    w = got["window"]
    import datetime as dt
    start, end = dt.datetime.fromisoformat(w["start"]), dt.datetime.fromisoformat(w["end"])
    planned = i.planned_window_seconds
    chosen = guard_baselines(spec, st, i)
    # The first look of each guard's sequence, as verify judged it.
    look = LookContext(1, planned, None, spec.verification.confidence)
    expected = [judge_guard(spec, b, measure_guard(spec, client, b, start, end, w["step_seconds"]), look, len(chosen))[0] for b in chosen]
    for g, e in zip(got["guards"], expected, strict=True):
        assert (g["signal"], g["verdict"], g["baseline_id"]) == (e.signal, e.verdict, e.baseline_id)
        assert g["window_mean"] == pytest.approx(e.window_mean, rel=1e-12, abs=0)
        assert (g["change_ratio"] is None) == (e.change_ratio is None)
        if e.change_ratio is not None:
            assert g["change_ratio"] == pytest.approx(e.change_ratio, rel=1e-9, abs=1e-15)


# --- the real process: prompt exit ------------------------------------------------------

def console(args, timeout: float = 60, **kw):
    return subprocess.run([*CONSOLE, *map(str, args)], capture_output=True, text=True, timeout=timeout, **kw)


def test_console_script_early_spec_error_exits_at_once(tmp_path):
    # the prefetch thread does not hold the process (a held one runs into the timeout)
    done = console(["verify", "--spec", tmp_path / "missing.yaml", "--class", "steady"], timeout=20)
    assert done.returncode == 2, done.stderr
    one_line(done.stderr)


def test_console_script_refused_prometheus(tmp_path, store, history):
    spec = write_guard_spec(tmp_path / "refused.yaml", f"http://127.0.0.1:{free_port()}", store)
    before = tree_digest(store)
    done = console(["verify", *verify_args(spec, history)])
    assert done.returncode == 3, done.stderr
    assert "connection refused" in one_line(done.stderr)
    assert tree_digest(store) == before


@pytest.fixture
def slow_spec(tmp_path, proxy, store):
    """Like ``gspec`` with a 10 s deadline (timeout 5 s): a request in flight can hold a
    process that waits for it for seconds."""
    return write_guard_spec(tmp_path / "slow.yaml", proxy.url, store, timeout_seconds=5, deadline_seconds=10)


def test_a_failed_primary_does_not_wait_for_slow_guards(proxy, slow_spec, store, history):
    """Primary 503 (fails in about a second with its retries); the guards' answers take 30 s.
    Run one at a time, verify stopped at the primary's error; it must not now wait for the
    guards' 10 s deadline before exiting."""
    proxy.route = lambda path: "5xx" if is_primary(path) else "slow" if is_guard(path) else None
    before = tree_digest(store)
    done = console(["verify", *verify_args(slow_spec, history)])
    assert done.returncode == 3, done.stderr
    assert "HTTP 503" in one_line(done.stderr, proxy.url)
    assert tree_digest(store) == before
    # Waiting for the guards would show as their retries: an attempt gives up after the
    # 5 s timeout and is tried again until the 10 s deadline. verify left before any.
    attempts = collections.Counter(path for path, _, _ in proxy.seen if is_guard(path))
    assert set(attempts.values()) <= {1}, f"guard queries retried: verify waited for them ({attempts})"


def test_sigint_during_slow_queries_exits_promptly(proxy, slow_spec, store, history):
    proxy.mode, proxy.only = "slow", lambda path: is_primary(path) or is_guard(path)
    before = tree_digest(store)
    p, out, err = interrupt(verify_args(slow_spec, history), lambda: sum(proxy.only(path) for path, _, _ in proxy.seen) >= 3, proxy)
    assert p.returncode == 130, err
    assert re.fullmatch(r"obsctl: (interrupted|aborted)", err.strip()), err
    assert tree_digest(store) == before
    assert_not_retried(proxy)


# --- a tampered stored cycle fit --------------------------------------------------------

TAMPERED = [
    ("unknown cycle", [{"cycle": "month", "p_value": 0.01, "amplitude": 0.2, "peak_hour": 3.0}]),
    ("p_value text", [{"cycle": "day", "p_value": "small", "amplitude": 0.2, "peak_hour": 3.0}]),
    ("not a list", {"cycle": "day", "p_value": 0.01, "amplitude": 0.2, "peak_hour": 3.0}),
    ("list of numbers", [1, 2]),
    ("missing field", [{"cycle": "day", "p_value": 0.01}]),
    ("extra field", [{"cycle": "day", "p_value": 0.01, "amplitude": 0.2, "peak_hour": 3.0, "x": 1}]),
]
#: Refused since models.CycleFit is strict (was: lax floats, no range, NaN allowed: a NaN or
#: boolean p-value read as "no cycle", so a tampered record silently lifted the cycle confound).
TAMPERED += [pytest.param(case, value, id=case) for case, value in [
    ("p_value numeric text", [{"cycle": "day", "p_value": "0.001", "amplitude": 0.2, "peak_hour": 3.0}]),
    ("p_value NaN", [{"cycle": "day", "p_value": float("nan"), "amplitude": 0.2, "peak_hour": 3.0}]),
    ("p_value above 1", [{"cycle": "day", "p_value": 5.0, "amplitude": 0.2, "peak_hour": 3.0}]),
    ("p_value boolean", [{"cycle": "day", "p_value": True, "amplitude": 0.2, "peak_hour": 3.0}]),
    ("amplitude infinite", [{"cycle": "day", "p_value": 0.001, "amplitude": float("inf"), "peak_hour": 3.0}]),
]]


@pytest.mark.parametrize(("case", "value"), TAMPERED, ids=[t[0] if isinstance(t, tuple) else t.id for t in TAMPERED])
def test_a_tampered_baseline_cycle_is_one_corrupt_store_line(case, value, proxy, gspec, store, history):
    (path,) = (store / "initiatives").glob("*.yaml")
    record = yaml.safe_load(path.read_text())
    record["baseline_cycle"] = value
    path.write_text(yaml.safe_dump(record, sort_keys=False))
    before = tree_digest(store)
    result = run(verify, verify_args(gspec, history))
    assert result.exit_code == 1, result.output
    line = one_line(result.stderr)
    assert "corrupt store file" in line and "baseline_cycle" in line, line
    assert tree_digest(store) == before


def test_sigint_during_the_load_context_exits_promptly(proxy, slow_spec, store, history):
    """Ctrl-C while the load context's queries (evidence.period_loads) hang."""
    def is_load(path: str) -> bool:
        q = promql(path)  # saturation inputs and demand (rules/saturation.py inputs, evidence.demand_query)
        return not is_alerts(path) and ("process_cpu_seconds_total" in q or "workload_class" in q)

    proxy.mode, proxy.only = "slow", is_load
    before = tree_digest(store)
    p, out, err = interrupt(verify_args(slow_spec, history, "--no-guards"), lambda: sum(is_load(path) for path, _, _ in proxy.seen) >= 4, proxy)
    assert p.returncode == 130, err
    assert re.fullmatch(r"obsctl: (interrupted|aborted)", err.strip()), err
    assert out == "" and tree_digest(store) == before
    assert_not_retried(proxy)


def test_guard_errors_come_in_guard_order_not_in_time_order(proxy, gspec, store, history):
    """quality_min (first guard by name) fails slowly (trickle: its 2 s deadline), request_seconds_max
    fails at once (503): the error shown is quality_min's, as when the guards ran one after the other."""
    def first_guard(path: str) -> bool:
        return promql(path).startswith(f"min({QUALITY}")

    proxy.route = lambda path: "trickle" if first_guard(path) else "5xx" if is_one_guard(path) else None
    before = tree_digest(store)
    result = run(verify, verify_args(gspec, history))
    assert result.exit_code == 3, result.output
    line = one_line(result.stderr, proxy.url)
    assert "no complete answer within 1s" in line and "503" not in line, line
    assert tree_digest(store) == before


@pytest.mark.parametrize("mode", ["reset_mid", "trickle", "not_http"])
def test_every_guard_faulted_at_once_is_still_one_line(mode, proxy, gspec, store, history):
    """Six guards failing together on the verify's worker threads: one line (the first guard's), no log noise."""
    proxy.mode, proxy.only = mode, is_guard
    before = tree_digest(store)
    result = run(verify, verify_args(gspec, history))
    assert result.exit_code == 3, result.output
    one_line(result.stderr, proxy.url)
    assert tree_digest(store) == before


@pytest.mark.parametrize("damage", ["yaml", "samples"])
def test_a_corrupt_guard_baseline_read_on_a_worker_is_one_line(damage, proxy, gspec, store, history):
    """The guards' baselines are read on the worker threads (verify._guard): a damaged record or
    samples file is one ``corrupt store file`` line naming it, exit 1, nothing written."""
    folder = store / "baselines" / "steady" / "request_seconds_max"
    if damage == "yaml":
        (path,) = folder.glob("*.yaml")
        path.write_text("id: [unclosed\n")
    else:
        (path,) = folder.glob("*.npz")
        path.write_bytes(b"PK\x03\x04 not a zip")
        # verify reads a guard's samples only without the side stored at initiative start
        # (as for initiatives started before it): with the side, the sidecar is not read.
        with_sides = tree_digest(store)
        assert run(verify, [*verify_args(gspec, history), "--output", "json"]).exit_code in (0, 10, 11)
        assert tree_digest(store) != with_sides  # the look was saved
        (record,) = (store / "initiatives").glob("*.yaml")
        data = yaml.safe_load(record.read_text())
        data["baseline_sides"] = []
        record.write_text(yaml.safe_dump(data, sort_keys=False))
    before = tree_digest(store)
    result = run(verify, verify_args(gspec, history))
    assert result.exit_code == 1, result.output
    line = one_line(result.stderr)
    assert "request_seconds_max" in line and "corrupt" in line, line
    assert tree_digest(store) == before




@pytest.mark.parametrize("value", [pytest.param(v, id=str(v))
                                   for v in (float("nan"), float("inf"), 1e300, -3600.0, 0.001)] + [pytest.param("1h", id="text")])
def test_a_tampered_planned_length_is_one_corrupt_store_line(value, proxy, gspec, store, history):
    """The planned length stored at initiative start (verify uses it, no re-plan)."""
    (path,) = (store / "initiatives").glob("*.yaml")
    record = yaml.safe_load(path.read_text())
    record["planned_window_seconds"] = value
    path.write_text(yaml.safe_dump(record, sort_keys=False))
    before = tree_digest(store)
    result = run(verify, ["--spec", gspec, "--class", "steady"])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 1, result.output
    line = one_line(result.stderr)
    assert "corrupt store file" in line and "planned_window_seconds" in line, line
    assert tree_digest(store) == before




@pytest.mark.parametrize("value", [pytest.param(v, id=str(v))
                                   for v in (float("nan"), float("inf"), -1.0, 5.0)] + [pytest.param("half", id="text")])
def test_a_tampered_earlier_look_is_one_corrupt_store_line(value, proxy, gspec, store, history):
    """An earlier look's information fraction sets this look's boundary (verify.look_context)."""
    first = run(verify, ["--spec", gspec, "--class", "steady", "--end", history.iso(1.5)])
    assert first.exit_code in (0, 10, 11), first.output
    (path,) = (store / "initiatives").glob("*.yaml")
    record = yaml.safe_load(path.read_text())
    record["verifications"][0]["assessment"]["information_fraction"] = value
    path.write_text(yaml.safe_dump(record, sort_keys=False))
    before = tree_digest(store)
    result = run(verify, verify_args(gspec, history))
    assert result.exit_code == 1, result.output
    line = one_line(result.stderr)
    assert "corrupt store file" in line and "information_fraction" in line, line
    assert tree_digest(store) == before




@pytest.mark.parametrize(("field", "value"), [
    pytest.param("step_seconds", 1e-9, id="step 1e-9"),
    pytest.param("coefficients", [float("nan")], id="coefficient NaN"),
    pytest.param("rho", [1.0, float("nan")], id="rho NaN"),
    pytest.param("step_seconds", "fast", id="step text"),
])
def test_a_tampered_baseline_memory_is_one_corrupt_store_line(field, value, proxy, gspec, store, history):
    (path,) = (store / "baselines" / "steady" / "tokens_per_second").glob("*.yaml")
    record = yaml.safe_load(path.read_text())
    record["memory"][field] = value
    path.write_text(yaml.safe_dump(record, sort_keys=False))
    before = tree_digest(store)
    result = run(verify, verify_args(gspec, history))
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 1, result.output
    line = one_line(result.stderr)
    assert "corrupt store file" in line and f"memory.{field}" in line, line
    assert tree_digest(store) == before
