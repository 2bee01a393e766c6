"""Every way a Prometheus answer can go wrong, injected by a proxy in front of a real
Prometheus: each mode gives its exit code, exactly one named ``obsctl: error:`` line on
stderr (no traceback) and leaves the store byte-for-byte unchanged."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import urllib.parse

import pytest
import yaml
from click.testing import CliRunner

from obsctl.baselining.commands.cli import snapshot_baseline, verify
from support.faultkit import seed_store, tree_digest, write_fault_spec
from support.faultproxy import HUGE_BYTES
from support.servers import free_port

API = r"/api/v1/(query_range|query|series)"
# (mode, exit code, regex the one error line must match after "obsctl: error: ")
CASES = [
    ("5xx", 3, rf"cannot reach Prometheus at URL: HTTP 503 from {API}: not JSON \(text/plain, \d+ bytes\): starts 'upstream connect error.*' \(after \d attempts in [\d.]+s\)"),
    ("html502", 3, rf"cannot reach Prometheus at URL: HTTP 502 from {API}: not JSON \(text/html, \d+ bytes\): an HTML page titled '502 Bad Gateway' \(after \d attempts"),
    ("login200", 3, rf"cannot use Prometheus at URL: not a Prometheus API answer from {API}: not JSON \(text/html; charset=utf-8, \d+ bytes\): an HTML page titled 'Sign in · Corp SSO'$"),
    ("bad_data400", 2, r"Prometheus rejected the query 'sum\(.*\)': invalid parameter \"query\": 1:5: parse error: unexpected \"}\"$"),
    ("execution422", 2, r"Prometheus rejected the query 'sum\(.*\)': query processing would load too many samples into memory$"),
    ("trickle", 3, r"cannot reach Prometheus at URL: no complete answer within 1s \(after 2 attempts in [\d.]+s; deadline 2s\)$"),
    ("slow", 3, r"cannot reach Prometheus at URL: no complete answer within 1s \(after 2 attempts in [\d.]+s; deadline 2s\)$"),
    ("redirect_loop", 3, rf"cannot use Prometheus at URL: HTTP 302 from {API} redirects to URL{API}\?\.\.\.; obsctl does not follow redirects"),
    ("truncated", 3, rf'cannot use Prometheus at URL: not a Prometheus API answer from {API}: truncated JSON \(application/json, [\d,]+ bytes\): starts .\{{"status":"success"'),
    ("deep", 3, rf"cannot use Prometheus at URL: not a Prometheus API answer from {API}: JSON nested too deeply \(application/json, 200,000 bytes\)$"),
    # A range answer is read only as far as one series of its points can take (about 1 MiB here).
    ("huge", 3, rf"cannot use Prometheus at URL: not a Prometheus API answer from {API}: not JSON \(text/plain, "
                rf"(over [\d,]+ bytes: the read stopped there|{HUGE_BYTES:,} bytes)\): starts 'x{{60}}'$"),
    ("overcap", 3, rf"cannot use Prometheus at URL: the answer from {API} is larger than the 1 MiB limit \(prometheus.body_size_limit"),
    ("nonjson", 3, rf"cannot use Prometheus at URL: not a Prometheus API answer from {API}: not JSON \(text/plain, 3 bytes\): starts 'OK'$"),
    ("wrong_types", 3, rf"cannot use Prometheus at URL: not a Prometheus API answer from {API}: data.result is dict, expected a list$"),
    ("wrong_result_type", 3, rf"cannot use Prometheus at URL: not a Prometheus API answer from {API}: data.resultType is 'vector', expected 'matrix'$"),
    ("401", 3, rf"cannot use Prometheus at URL: HTTP 401 from {API}: the credentials were refused: check prometheus.authorization$"),
    ("403", 3, rf"cannot use Prometheus at URL: HTTP 403 from {API}: the credentials were refused for this request \(forbidden\): check prometheus.authorization$"),
    # Below HTTP and odd envelopes (each was a garbled repr or passed silently before)
    ("reset_mid", 3, r"cannot reach Prometheus at URL: connection reset by the server in the middle of the answer \(after \d attempts in [\d.]+s"),
    ("not_http", 3, r"cannot reach Prometheus at URL: not an HTTP answer \(it began 'SSH-2.0-OpenSSH_9.6'\) \(after \d attempts"),
    ("chunked_forever", 3, r"cannot reach Prometheus at URL: no complete answer within 1s \(after 2 attempts in [\d.]+s; deadline 2s\)$"),
    ("status_error200", 3, rf"cannot use Prometheus at URL: not a Prometheus API answer from {API}: HTTP 200 store gateway unavailable$"),
    ("warnings_nonstring", 3, rf"cannot use Prometheus at URL: not a Prometheus API answer from {API}: warnings\[0\] is not a string, expected a list of strings$"),
]


#: Spec changes per mode: the 50 MB body is under the default 64 MiB cap, so it is named as
#: non-JSON (a range answer after its first MiB, an instant or series answer whole); reading
#: it must not race the short test deadlines on a loaded machine, so the mode gets deadlines
#: no machine misses (what is checked is the content, not the speed).
SPEC_CHANGES = {"huge": {"body_size_limit": "64MiB", "timeout_seconds": 120, "deadline_seconds": 240}}


def run(cmd, args):
    return CliRunner().invoke(cmd, [str(a) for a in args])


def snap(spec, history):
    return run(snapshot_baseline, ["--spec", spec, "--class", "steady", "--window", "1h", "--end", history.iso(1)])


@pytest.fixture(scope="module")
def seeded_store(tmp_path_factory, history):
    """A store holding one baseline (steady) and an open initiative, made once through a
    pass-through proxy; each test works on its own copy."""
    return seed_store(tmp_path_factory.mktemp("seeded"), history, write_fault_spec)


@pytest.fixture
def fault_spec(tmp_path, proxy, seeded_store):
    """A spec through the proxy with a bearer token (so 401/403 name it), a 1 MiB body
    cap, and a copy of the seeded store."""
    token = tmp_path / "token"
    token.write_text("fault-test-token\n")
    shutil.copytree(seeded_store, tmp_path / "store")
    return write_fault_spec(tmp_path / "obsctl.yaml", proxy.url, tmp_path / "store",
                            body_size_limit="1MiB", authorization={"credentials_file": str(token)})


def one_error_line(result, proxy, pattern: str) -> re.Match:
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output
    line = lines[0].replace(proxy.url, "URL")
    assert line.startswith("obsctl: error: "), line
    match = re.search(pattern, line.removeprefix("obsctl: error: "))
    assert match, f"{line!r} does not match {pattern!r}"
    return match


@pytest.mark.parametrize(("mode", "code", "pattern"), CASES, ids=[c[0] for c in CASES])
def test_snapshot_fault_mode(mode, code, pattern, proxy, fault_spec, history, tmp_path):
    if mode in SPEC_CHANGES:
        spec = yaml.safe_load(fault_spec.read_text())
        spec["prometheus"].update(SPEC_CHANGES[mode])
        fault_spec.write_text(yaml.safe_dump(spec, sort_keys=False))
    before = tree_digest(tmp_path / "store")
    proxy.mode = mode
    result = snap(fault_spec, history)
    assert result.exit_code == code, result.output
    one_error_line(result, proxy, pattern)  # the deadline modes: "after 2 attempts ...; deadline 2s" (the seconds taken are not asserted)
    assert tree_digest(tmp_path / "store") == before


@pytest.mark.parametrize("mode", ["trickle", "deep", "login200", "401", "5xx"])
def test_verify_fault_mode_keeps_the_store(mode, proxy, fault_spec, history, tmp_path):
    before = tree_digest(tmp_path / "store")
    proxy.mode = mode
    result = run(verify, ["--spec", fault_spec, "--class", "steady", "--end", history.iso(2), "-o", "json"])
    code, pattern = next((c, p) for m, c, p in CASES if m == mode)
    assert result.exit_code == code, result.output
    one_error_line(result, proxy, pattern.replace(API, API))
    assert tree_digest(tmp_path / "store") == before
    proxy.mode = "pass"  # and the same command works once the fault is gone
    assert run(verify, ["--spec", fault_spec, "--class", "steady", "--end", history.iso(2)]).exit_code == 0


def test_a_failed_load_context_query_costs_its_own_period_only(proxy, fault_spec, history):
    """The load context's queries run concurrently (evidence.period_loads): HTTP 503 on
    the baseline period's CPU query leaves that period's load unknown, with the error in
    the notes; the window's load, the verdict and its save are unaffected."""
    t1 = history.at(1)

    def baseline_cpu(path: str) -> bool:
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(path).query)
        return "process_cpu_seconds_total" in query.get("query", [""])[0] and float(query.get("start", ["inf"])[0]) < t1

    proxy.mode, proxy.only = "5xx", baseline_cpu
    result = run(verify, ["--spec", fault_spec, "--class", "steady", "--end", history.iso(2), "-o", "json"])
    assert result.exit_code == 0, result.output
    res = json.loads(result.stdout)
    notes = res["design_context"]["notes"]
    assert any(n.startswith("baseline: load context not read (cannot reach Prometheus at") and "HTTP 503" in n for n in notes), notes
    assert not any(n.startswith("window: load context not read") for n in notes), notes
    load = res["design_context"]["load"]
    assert load["before"]["state"] is None and load["after"]["name"] == "window"
    assert sum(baseline_cpu(path) for path, _, _ in proxy.seen) >= 2  # retried like any request


def test_a_secret_echoed_in_a_header_is_scrubbed_before_it_is_cut(proxy, fault_spec, history, tmp_path):
    """The Content-Type is shown cut to 60 characters: cut first, the token's head leaked."""
    before = tree_digest(tmp_path / "store")
    proxy.mode = "echo_content_type"
    result = snap(fault_spec, history)
    assert result.exit_code == 3, result.output
    one_error_line(result, proxy, r"not a Prometheus API answer from .*: not JSON \(text/html; charset=utf-8; echo=Authorization: Bearer <secre")
    assert "fault-t" not in result.output and "test-token" not in result.output
    assert tree_digest(tmp_path / "store") == before


def test_http10_answer_without_content_length_is_read_to_the_close(proxy, fault_spec, history, tmp_path):
    proxy.mode = "http10_nolength"
    result = snap(fault_spec, history)
    assert result.exit_code == 0, result.output


def test_refused_connection(fault_spec, history, tmp_path):
    spec = yaml.safe_load(fault_spec.read_text())
    spec["prometheus"]["url"] = f"http://127.0.0.1:{free_port()}"
    fault_spec.write_text(yaml.safe_dump(spec, sort_keys=False))
    before = tree_digest(tmp_path / "store")
    result = snap(fault_spec, history)
    assert result.exit_code == 3
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and re.fullmatch(r"obsctl: error: cannot reach Prometheus at http://127\.0\.0\.1:\d+: connection refused "
                                            r"\(after 3 attempts in [\d.]+s\)", lines[0]), result.stderr
    assert tree_digest(tmp_path / "store") == before


def test_deep_json_through_the_console_script(proxy, fault_spec, history):
    """The real entry point (run_main): a RecursionError-sized answer is one line, exit 3."""
    proxy.mode = "deep"
    done = subprocess.run([sys.executable, "-c", "from obsctl.cli import main; main()", "snapshot-baseline", "--spec", str(fault_spec),
                           "--class", "steady", "--window", "1h", "--end", history.iso(1)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "JSON nested too deeply" in lines[0], done.stderr


def test_proxy_url_carries_every_request(proxy, fault_spec, history):
    spec = yaml.safe_load(fault_spec.read_text())
    # A host name that does not resolve: only the proxy can reach "it".
    spec["prometheus"].update(url="http://prometheus.obsctl.invalid:9090", proxy_url=proxy.url)
    fault_spec.write_text(yaml.safe_dump(spec, sort_keys=False))
    result = snap(fault_spec, history)
    assert result.exit_code == 0, result.output
    assert proxy.seen and all(path.startswith("http://prometheus.obsctl.invalid:9090/api/v1/") for path, _, _ in proxy.seen)
