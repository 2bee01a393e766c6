"""The loop against a small local http.server stand-in for Prometheus: malformed API
answers, raw bytes, redirects, NaN/Inf and overflowing samples, unusable stores and
bad times. The stand-in answers like
Prometheus' HTTP API (query_range matrix at the requested step, series, query), so no
Prometheus process is needed; the real-Prometheus path is in tests/integration."""

from __future__ import annotations

import datetime as dt
import json
import math
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from obsctl.baselining.commands.cli import baseline, initiative, report, snapshot_baseline, target, verify
from obsctl.baselining.store import Store
from obsctl.errors import PrometheusUnavailable, StoreError
from obsctl.promapi import PrometheusClient

END = 1_767_225_600  # 2026-01-01T00:00:00Z, a multiple of the 15 s step
HOUR = 3600


def _strict(text: str):
    """json.loads that refuses NaN/Infinity (not JSON, RFC 8259)."""
    def refuse(name):
        raise ValueError(f"non-JSON constant {name}")
    return json.loads(text, parse_constant=refuse)


class FakePrometheus:
    """A ThreadingHTTPServer on 127.0.0.1 whose answers follow ``self.mode``.

    Modes: ``ok`` (one series, value ``self.value(t)``), ``nulldata``, ``listdata``,
    ``noresult``, ``badvalue``, ``garbage``, ``redirect``, ``seriesbad``."""

    def __init__(self):
        self.mode = "ok"
        self.value = lambda t: 100.0 if t <= END - HOUR else 200.0
        self.requests = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                fake.requests += 1
                code, headers, body = fake.answer(self.path)
                self.send_response(code)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def answer(self, path: str) -> tuple[int, dict, bytes]:
        q = urllib.parse.parse_qs(urllib.parse.urlparse(path).query)
        js = {"Content-Type": "application/json"}
        fixed = {
            "nulldata": b'{"status":"success","data":null}',
            "listdata": b'{"status":"success","data":[1,2]}',
            "noresult": b'{"status":"success","data":{"resultType":"matrix"}}',
            "badvalue": b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"abc"]]}]}}',
            "garbage": b"\x00\xff\xfegarbage{{{\x1b[31m",
        }
        if self.mode in fixed:
            return 200, js, fixed[self.mode]
        if self.mode == "redirect":
            return 302, {"Location": "http://127.0.0.1:1/elsewhere"}, b""
        if "/api/v1/query_range" in path and "obsctl_leg" in q["query"][0]:
            # The coverage query (baselining/measure/coverage.py) of a series scraped at every step: no gap, no push.
            return 200, js, b'{"status":"success","data":{"resultType":"matrix","result":[]}}'
        if "/api/v1/query_range" in path:
            start, end, step = float(q["start"][0]), float(q["end"][0]), float(q["step"][0])
            values, t = [], start
            while t <= end + 1e-9:
                v = self.value(t)
                values.append([t, "NaN" if math.isnan(v) else ("+Inf" if v == math.inf else repr(float(v)))])
                t += step
            return 200, js, json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {}, "values": values}]}}).encode()
        if "/api/v1/series" in path:
            if self.mode == "seriesbad":
                return 200, js, b'{"status":"success","data":[{"job":1}]}'
            return 200, js, b'{"status":"success","data":[{"__name__":"bt_tokens","job":"w"}]}'
        return 200, js, b'{"status":"success","data":{"resultType":"vector","result":[]}}'

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def fake():
    with FakePrometheus() as server:
        yield server


def write_spec(path: Path, url: str, store: Path, targets: list | None = None) -> Path:
    spec = {
        "version": 1,
        "prometheus": {"url": url, "timeout_seconds": 5},
        "store": str(store),
        "workload_classes": [{"name": "a", "kind": "inference", "selector": {"job": "w", "workload": "a"}}],
        "signals": [{"name": "tokens", "category": "throughput", "query": "sum(bt_tokens{$selector})", "unit": "tokens/s",
                     "direction": "higher_is_better"}],
        "verification": {"window": "1h", "step": "15s", "confidence": 0.95, "min_effect_ratio": 0.02},
    }
    if targets:
        spec["targets"] = targets
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@pytest.fixture
def spec(tmp_path, fake) -> Path:
    return write_spec(tmp_path / "obsctl.yaml", fake.url, tmp_path / "store")


def run(cmd, args):
    return CliRunner().invoke(cmd, [str(a) for a in args])


def iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def snap(spec, end=END - HOUR, extra=()):
    return run(snapshot_baseline, ["--spec", spec, "--end", iso(end), *extra])


def started(spec, at=END - HOUR):
    snapped = snap(spec)
    assert snapped.exit_code == 0, snapped.output
    r = run(initiative, ["start", "--spec", spec, "--name", "bs 32", "--lever", "batch-size", "--class", "a",
                         "--signal", "tokens", "--started-at", iso(at), "--output", "json"])
    assert r.exit_code == 0, r.output
    return _strict(r.stdout)["id"]


# --- 4 / 15: malformed answers, raw bytes, redirects -------------------------------------------


@pytest.mark.parametrize(("mode", "what"), [
    ("nulldata", "data missing"),
    ("listdata", "data is list, expected an object"),
    ("noresult", "data.result missing"),
    ("badvalue", "data.result[0].values[0] value 'abc' is not a number"),
])
def test_malformed_success_answer_is_unavailable_naming_url(fake, spec, mode, what):
    fake.mode = mode
    r = snap(spec)
    assert r.exit_code == 3, r.output
    assert r.stderr.strip() == f"obsctl: error: cannot use Prometheus at {fake.url}: not a Prometheus API answer from /api/v1/query_range: {what}"


def test_malformed_series_answer(fake):
    fake.mode = "seriesbad"
    with pytest.raises(PrometheusUnavailable, match="not a Prometheus API answer from /api/v1/series: data\\[0\\].metric has a non-string label"):
        PrometheusClient(fake.url).series(["up"], 0, 10)


def test_garbage_bytes_are_escaped(fake, spec):
    fake.mode = "garbage"
    r = snap(spec)
    assert r.exit_code == 3
    line = r.stderr.strip()
    assert line.isprintable() and "\x00" not in line and "\x1b" not in line
    assert "\\x00\\xff\\xfegarbage{{{\\x1b[31m" in line


def test_redirect_names_the_target_and_is_not_followed(fake, spec):
    fake.mode = "redirect"
    r = snap(spec)
    assert r.exit_code == 3
    assert f"cannot use Prometheus at {fake.url}: HTTP 302 from /api/v1/query_range redirects to http://127.0.0.1:1/elsewhere" in r.stderr
    assert "connection refused" not in r.stderr


# --- 11 / 15: NaN, Inf and overflowing samples -------------------------------------------------


def test_all_nan_is_no_data_with_count(fake, spec):
    fake.value = lambda t: math.nan
    r = snap(spec)
    assert r.exit_code == 1
    assert "a/tokens ... NO DATA (240 samples, all NaN/Inf)" in r.stderr
    assert "a/tokens: NO DATA (240 samples, all NaN/Inf); not stored" in r.stdout


def test_some_nan_are_dropped_and_counted(fake, spec):
    fake.value = lambda t: math.nan if int(t) % 60 == 0 else 100.0
    r = snap(spec, extra=["--output", "json"])
    assert r.exit_code == 0, r.output
    outcome = _strict(r.stdout)["outcomes"][0]
    assert outcome["dropped_non_finite"] == 60 and outcome["sample_count"] == 180
    assert "(60 NaN/Inf dropped)" in r.stderr


def test_overflowing_samples_are_not_stored(fake, spec, tmp_path):
    fake.value = lambda t: math.inf if int(t) % 30 else 1e308
    r = snap(spec)
    assert r.exit_code == 1, r.output
    assert "NO DATA (the mean" in r.stdout and "not finite" in r.stdout
    assert "RuntimeWarning" not in r.stderr and "overflow encountered" not in r.stderr
    assert not (tmp_path / "store" / "baselines").exists()


def test_verify_overflowing_window_is_no_data_and_json_is_strict(fake, spec):
    iid = started(spec)
    fake.value = lambda t: 1e308
    r = run(verify, ["--spec", spec, "--initiative", iid, "--end", iso(END), "--output", "json"])
    assert r.exit_code == 13, r.output
    doc = _strict(r.stdout)
    assert doc["verdict"] == "NO_DATA" and "not finite" in doc["reason"]
    assert "nan" not in r.stdout.lower().replace("nan/inf", "")


def test_verify_all_nan_window_reason(fake, spec):
    iid = started(spec)
    fake.value = lambda t: math.nan
    r = run(verify, ["--spec", spec, "--initiative", iid, "--end", iso(END)])
    assert r.exit_code == 13
    assert r.stdout.startswith("NO_DATA: tokens: window: 240 samples, all NaN/Inf;")


def test_target_show_non_finite_and_zero_baseline(fake, tmp_path):
    # 2: a baseline mean of 0 (an error ratio with no errors) has no gap ratio. snapshot-baseline
    # refuses such a baseline now; one stored before that still shows as n/a.
    spec = write_spec(tmp_path / "o.yaml", fake.url, tmp_path / "store",
                      targets=[{"workload_class": "a", "signal": "tokens", "relative": 0.5, "driver": "d", "deadline": "2027-01-01"}])
    fake.value = lambda t: 0.0
    refused = snap(spec)
    assert refused.exit_code == 1 and "a/tokens: REFUSED (the mean over the window is 0" in refused.stdout
    fake.value = lambda t: 1.0
    assert snap(spec).exit_code == 0
    store = Store(tmp_path / "store")
    b = store.current_baseline("a", "tokens")
    zero = b.stats.model_copy(update={"mean": 0.0, "median": 0.0, "p5": 0.0, "p95": 0.0, "stddev": 0.0,
                                      "batch_means": [0.0] * len(b.stats.batch_means)})
    store.save_baseline(b.model_copy(update={"id": b.id + "z", "stats": zero, "samples": [(t, 0.0) for t, _ in b.samples]}))
    r = run(target, ["show", "--spec", spec])
    assert r.exit_code == 0, r.output
    # The target was anchored by the snapshot (mean 1): the zero baseline does not move it.
    assert "a/tokens: baseline 0 -> target 1.5 tokens/s (gap +1.5, gap ratio n/a)" in r.stdout
    js = run(target, ["show", "--spec", spec, "-o", "json"])
    assert _strict(js.stdout)[0]["gap_ratio"] is None
    # 11: a stored baseline whose mean is Inf (written before this fix) reads as n/a / null.
    store = Store(tmp_path / "store")
    b = store.current_baseline("a", "tokens")
    store.save_baseline(b.model_copy(update={"id": b.id + "x", "stats": b.stats.model_copy(update={"mean": math.inf})}))
    r = run(target, ["show", "--spec", spec])
    assert r.exit_code == 0 and "has no finite mean" in r.stdout
    for cmd, args in ((target, ["show"]), (baseline, ["list"]), (baseline, ["list", "--history"]), (baseline, ["show", "--class", "a", "--signal", "tokens"])):
        out = run(cmd, [*args, "--spec", spec, "-o", "json"])
        assert out.exit_code == 0, out.output
        _strict(out.stdout)


# --- 3: unusable store; verify keeps its verdict -----------------------------------------------


def test_lock_directory_is_one_line_for_every_writer(fake, spec, tmp_path):
    iid = started(spec)
    lock = tmp_path / "store" / ".lock"
    lock.unlink()
    lock.mkdir()
    for cmd, args in (
        (snapshot_baseline, ["--end", iso(END - HOUR)]),
        (initiative, ["close", "--initiative", iid]),
        (baseline, ["promote", "--initiative", iid]),
    ):
        r = run(cmd, args[:1] + ["--spec", spec] + args[1:] if cmd is not snapshot_baseline else ["--spec", spec, *args])
        assert r.exit_code == 1, (cmd.name, r.output)
        assert r.stderr.strip() == f"obsctl: error: {lock}: cannot take the store lock: Is a directory", r.output
        assert r.exception is None or isinstance(r.exception, SystemExit)


def test_verify_shows_no_verdict_when_its_look_cannot_be_logged(fake, spec, tmp_path):
    iid = started(spec)
    lock = tmp_path / "store" / ".lock"
    lock.unlink()
    lock.mkdir()
    r = run(verify, ["--spec", spec, "--initiative", iid, "--end", iso(END)])
    assert r.exit_code == 1 and r.stdout == ""
    (error,) = r.stderr.strip().splitlines()
    assert error == f"obsctl: error: no verdict shown: its look could not be logged ({lock}: cannot take the store lock: Is a directory)"
    js = run(verify, ["--spec", spec, "--initiative", iid, "--end", iso(END), "-o", "json"])
    assert js.exit_code == 1 and _strict(js.stdout) == {"error": error.removeprefix("obsctl: error: "), "exit_code": 1}
    lock.rmdir()
    store = Store(tmp_path / "store")
    assert store.initiative(iid).verifications == [] and store.looks("a", "tokens") == []


def test_verify_prints_a_logged_verdict_it_cannot_store_on_the_initiative(fake, spec, tmp_path, monkeypatch):
    # The look is in the log (the guarantee holds); only the result's record failed: the
    # verdict is shown, the error follows, exit 1, and the initiative is unchanged.
    iid = started(spec)

    def refuse(self, initiative):
        raise StoreError(f"{self.path}: cannot write the initiative (disk full)")

    monkeypatch.setattr(Store, "save_initiative", refuse)
    r = run(verify, ["--spec", spec, "--initiative", iid, "--end", iso(END)])
    assert r.exit_code == 1 and r.stdout.startswith("IMPROVED: tokens +100.0 %")
    assert r.stderr.strip() == f"obsctl: error: verdict IMPROVED not saved: {tmp_path / 'store'}: cannot write the initiative (disk full)"
    monkeypatch.undo()
    store = Store(tmp_path / "store")
    assert store.initiative(iid).verifications == [] and [look.verdict for look in store.looks("a", "tokens")] == ["IMPROVED"]


# --- 14: a broken store is not an empty store --------------------------------------------------


def test_initiative_list_on_broken_store(fake, tmp_path):
    as_file = tmp_path / "st_file"
    as_file.write_text("x\n")
    r = run(initiative, ["list", "--spec", write_spec(tmp_path / "f.yaml", fake.url, as_file)])
    assert r.exit_code == 1 and f"{as_file}: not a directory" in r.stderr
    store = tmp_path / "st_ini"
    (store).mkdir()
    (store / "initiatives").write_text("hi\n")
    r = run(initiative, ["list", "--spec", write_spec(tmp_path / "i.yaml", fake.url, store)])
    assert r.exit_code == 1 and f"{store / 'initiatives'}: not a directory" in r.stderr


# --- 9: corrupt current.yaml, no orphan; history still lists ----------------------------------


def test_snapshot_with_corrupt_current_writes_nothing(fake, spec, tmp_path):
    assert snap(spec).exit_code == 0
    current = tmp_path / "store" / "current.yaml"
    current.write_text(current.read_text()[:15] + "\n  - [\n")
    records = sorted((tmp_path / "store" / "baselines" / "a" / "tokens").iterdir())
    r = snap(spec, end=END)
    assert r.exit_code == 1 and "current.yaml" in r.stderr
    assert sorted((tmp_path / "store" / "baselines" / "a" / "tokens").iterdir()) == records
    hist = run(baseline, ["list", "--history", "--spec", spec])
    assert hist.exit_code == 0 and "a/tokens: 100 tokens/s" in hist.stdout
    assert "warning: cannot tell which baselines are current" in hist.stderr


# --- 5 / 10: windows and times -----------------------------------------------------------------


@pytest.mark.parametrize(("args", "message"), [
    (["--end", "inf"], "--end: 'inf' is out of range"),
    (["--end", "1e20"], "--end: '1e20' is out of range"),
    (["--end", "0001-01-01T00:30:00Z"], "--end: '0001-01-01T00:30:00Z' is out of range"),
    (["--window", "50y"], "--window: too long"),
    (["--window", "99999999999999y"], "--window: '99999999999999y' is too long"),
    (["--window", "1h", "--end", "1970-01-01T00:30:00Z"], "out of range: the window would start before 1970"),
])
def test_snapshot_bad_times_are_usage_errors(fake, spec, args, message):
    r = run(snapshot_baseline, ["--spec", spec, *args])
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith("obsctl: error: ") and message in r.stderr
    assert fake.requests == 0


def test_verify_bad_windows_are_usage_errors(fake, spec):
    iid = started(spec)
    asked = fake.requests
    cases = [
        (["--start", "0", "--allow-before-start"], "--start: too long"),
        (["--window", "99999999999999y"], "--window: '99999999999999y' is too long"),
        (["--end", "inf"], "--end: 'inf' is out of range"),
        (["--start", iso(END - 2 * HOUR), "--end", iso(END)], f"--start {iso(END - 2 * HOUR)} is before the initiative's start {iso(END - HOUR)}"),
        (["--start", iso(END - 3 * HOUR), "--end", iso(END - 2 * HOUR)], f"--end {iso(END - 2 * HOUR)} is not after the initiative's start"),
    ]
    for args, message in cases:
        r = run(verify, ["--spec", spec, "--initiative", iid, *args])
        assert r.exit_code == 2, (args, r.output)
        assert message in r.stderr, (args, r.stderr)
    assert fake.requests == asked  # refused before any query
    # --allow-before-start measures the window anyway (and says it is the old state: NO_CHANGE).
    ok = run(verify, ["--spec", spec, "--initiative", iid, "--start", iso(END - 2 * HOUR), "--end", iso(END - HOUR), "--allow-before-start"])
    assert ok.exit_code == 10, ok.output


def test_initiative_start_refuses_future_and_non_finite_impact(fake, spec):
    assert snap(spec).exit_code == 0
    base = ["start", "--spec", spec, "--name", "q", "--lever", "topology", "--class", "a", "--signal", "tokens"]
    future = run(initiative, [*base, "--started-at", "2099-01-01T00:00:00Z"])
    assert future.exit_code == 2 and "--started-at 2099-01-01T00:00:00Z is in the future" in future.stderr
    for value in ("nan", "inf", "-inf"):
        r = run(initiative, [*base, "--expected-impact", value])
        assert r.exit_code == 2 and "--expected-impact" in r.stderr and "give a relative effect other than 0, above -1" in r.stderr
    soon = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=60)  # clock skew allowance
    assert run(initiative, [*base, "--started-at", soon.strftime("%Y-%m-%dT%H:%M:%SZ")]).exit_code == 0


def test_close_and_restart_a_second_later_continues_no_fresh_sequence(fake, spec, tmp_path):
    iid = started(spec)
    assert run(verify, ["--spec", spec, "--initiative", iid, "--end", iso(END)]).exit_code == 0
    assert run(initiative, ["close", "--spec", spec, "--initiative", iid]).exit_code == 0
    moved = run(initiative, ["start", "--spec", spec, "--name", "bs 32 again", "--lever", "batch-size", "--class", "a",
                             "--signal", "tokens", "--started-at", iso(END - HOUR + 1)])
    assert moved.exit_code == 1
    assert f"a/tokens was already looked at from {iso(END - HOUR)} to {iso(END)} (1 look(s), initiative {iid})" in moved.stderr
    same = run(initiative, ["start", "--spec", spec, "--name", "bs 32 again", "--lever", "batch-size", "--class", "a",
                            "--signal", "tokens", "--started-at", iso(END - HOUR), "--output", "json"])
    assert same.exit_code == 0, same.output
    second = _strict(same.stdout)["id"]
    assert run(verify, ["--spec", spec, "--initiative", second, "--end", iso(END)]).exit_code == 0
    logged = Store(tmp_path / "store").looks("a", "tokens")  # the same change's sequence goes on
    assert [(x.number, x.initiative, x.sequence_start) for x in logged] == [(1, iid, logged[0].sequence_start), (2, second, logged[0].sequence_start)]


# --- flags that contradict each other, notes in text, reports without partial output ----------


def test_verify_start_with_window_is_a_usage_error_naming_both(fake, spec):
    iid = started(spec)
    asked = fake.requests
    args = ["--spec", spec, "--initiative", iid, "--start", iso(END - HOUR), "--window", "10m", "--end", iso(END)]
    r = run(verify, args)
    assert r.exit_code == 2, r.output
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("obsctl: error: --start and --window") and r.stdout == ""
    js = run(verify, [*args, "--output", "json"])
    assert js.exit_code == 2 and _strict(js.stdout) == {"error": line.removeprefix("obsctl: error: "), "exit_code": 2}
    assert fake.requests == asked  # refused before any query
    assert Store(Path(yaml.safe_load(Path(spec).read_text())["store"])).looks("a", "tokens") == []


def test_verify_class_other_than_the_initiatives_is_a_usage_error_naming_both(fake, spec):
    doc = yaml.safe_load(Path(spec).read_text())
    doc["workload_classes"].append({"name": "b", "kind": "inference", "selector": {"job": "w", "workload": "b"}})
    Path(spec).write_text(yaml.safe_dump(doc, sort_keys=False))
    iid = started(spec)
    asked = fake.requests
    r = run(verify, ["--spec", spec, "--class", "b", "--initiative", iid, "--end", iso(END)])
    assert r.exit_code == 2, r.output
    assert f"--class b does not match --initiative {iid}, whose class is a" in r.stderr and r.stdout == ""
    assert fake.requests == asked
    same = run(verify, ["--spec", spec, "--class", "a", "--initiative", iid, "--end", iso(END)])
    assert same.exit_code == 0, same.output


def test_verify_text_shows_every_assessment_note_json_has(fake, spec):
    # A level changed between looks: the sequence keeps its first level and says so, in both outputs.
    iid = started(spec)
    first = run(verify, ["--spec", spec, "--initiative", iid, "--end", iso(END - HOUR // 2)])
    assert first.exit_code in (0, 11), first.output
    assert "note:" not in first.stdout
    doc = yaml.safe_load(Path(spec).read_text())
    doc["verification"]["confidence"] = 0.99
    Path(spec).write_text(yaml.safe_dump(doc, sort_keys=False))
    js = run(verify, ["--spec", spec, "--initiative", iid, "--end", iso(END), "--output", "json"])
    notes = _strict(js.stdout)["assessment"]["notes"]
    assert any("verification.confidence is now 99 %" in n for n in notes), notes
    typed = _strict(js.stdout)["notes"]
    assert any(n["kind"] == "level" and "verification.confidence is now 99 %" in n["detail"] for n in typed), typed
    text = run(verify, ["--spec", spec, "--initiative", iid, "--end", iso(END)])
    assert text.exit_code == js.exit_code, text.output
    assert "note: this change keeps the confidence level of its first look" in text.stdout and "now 99 %" not in text.stdout
    shown = run(verify, ["--spec", spec, "--initiative", iid, "--end", iso(END), "--verbose"]).stdout.splitlines()
    for note in _strict(run(verify, ["--spec", spec, "--initiative", iid, "--end", iso(END), "-o", "json"]).stdout)["assessment"]["notes"]:
        assert f"  diagnostic: {note}" in shown, (note, shown)


def test_report_with_a_corrupt_look_log_writes_no_file(fake, spec, tmp_path):
    iid = started(spec)
    assert run(verify, ["--spec", spec, "--initiative", iid, "--end", iso(END)]).exit_code == 0
    log = Store(tmp_path / "store").looks_file("a", "tokens")
    log.write_bytes(log.read_bytes() + b'{"schema_version": 1, "workload')  # a half line
    out = tmp_path / "out"
    r = run(report, ["--spec", spec, "--initiative", iid, "--out", out])
    assert r.exit_code == 1, r.output
    assert "corrupt look log line" in r.stderr and r.stdout == ""
    js = run(report, ["--spec", spec, "--initiative", iid, "--out", out, "--output", "json"])
    assert js.exit_code == 1 and "corrupt look log line" in _strict(js.stdout)["error"]
    assert not out.exists() or list(out.iterdir()) == []


def test_report_whose_markdown_cannot_be_written_leaves_no_new_figure(fake, spec, tmp_path):
    iid = started(spec)
    assert run(verify, ["--spec", spec, "--initiative", iid, "--end", iso(END)]).exit_code == 0
    out = tmp_path / "out"
    (out / f"{iid}.md").mkdir(parents=True)  # the report's name is taken by a directory
    r = run(report, ["--spec", spec, "--initiative", iid, "--out", out])
    assert r.exit_code == 1 and f"cannot write {out / f'{iid}.md'}" in r.stderr, r.output
    assert sorted(x.name for x in out.iterdir()) == [f"{iid}.md"]
    # An earlier figure is put back as it was.
    (out / f"{iid}.png").write_bytes(b"old figure")
    assert run(report, ["--spec", spec, "--initiative", iid, "--out", out]).exit_code == 1
    assert (out / f"{iid}.png").read_bytes() == b"old figure"
    (out / f"{iid}.md").rmdir()
    ok = run(report, ["--spec", spec, "--initiative", iid, "--out", out])
    assert ok.exit_code == 0, ok.output
    assert (out / f"{iid}.png").read_bytes().startswith(b"\x89PNG") and (out / f"{iid}.md").is_file()


def test_time_flags_say_a_time_without_offset_is_utc(monkeypatch):
    import time

    from obsctl.baselining.commands.publish_cli import publish
    from obsctl.baselining.commands.review_cli import review
    from obsctl.timeutil import parse_instant

    flags = [(verify, "start"), (verify, "end"), (snapshot_baseline, "end"), (initiative.commands["start"], "started_at"),
             (review, "as_of"), (publish, "as_of")]
    for cmd, name in flags:
        (param,) = [p for p in cmd.params if p.name == name]
        assert "without an offset, UTC" in param.help, (cmd.name, name)
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        assert parse_instant("2026-12-04T11:50:30", "--end") == dt.datetime(2026, 12, 4, 11, 50, 30, tzinfo=dt.UTC)
    finally:
        monkeypatch.undo()
        time.tzset()



#: What plain words never carry: a p-value, a statistic, a test's name, a level, a model's internals.
DIAGNOSTIC = ("p = ", "p-value", "Yule", "Ljung", "boundary z", "dof", "innovation", "effective samples", "variance ratio", "level 0.0")


def test_verify_notes_plain_by_default_full_with_verbose_both_in_json_and_the_report(fake, spec, tmp_path):
    # Seeded AR(1) (phi 0.9, 15 s) before the change, the same memory 1.6x as wide after it: the
    # window's innovations are noisier (rescaled) and its spread is its own; the history holds
    # enough past hours for the placebo check.
    import numpy as np
    from scipy import signal as spsignal

    rng = np.random.default_rng(5)
    n = 40 * 240
    before = spsignal.lfilter([1.0], [1.0, -0.9], rng.standard_normal(n) * math.sqrt(1 - 0.81))
    after = 1.6 * spsignal.lfilter([1.0], [1.0, -0.9], rng.standard_normal(n) * math.sqrt(1 - 0.81))
    fake.value = lambda t: 100.0 + (before if t <= END - HOUR else after)[int((t - (END - 30 * HOUR)) // 15) % n]
    iid = started(spec)
    args = ["--spec", spec, "--initiative", iid, "--end", iso(END)]
    js = _strict(run(verify, [*args, "-o", "json"]).stdout)
    kinds = [n["kind"] for n in js["notes"]]
    # This seed's baseline is suggestive (its stationarity test's smaller p below 0.5): the window is
    # judged again against its later part, which caps the verdict; the cap's tests are the first note.
    assert kinds == ["baseline-later-level", "variance-noisier", "scale-own", "placebo-held"], js["notes"]
    judged = js["notes"][1:]  # the comparison's own notes
    assert [n["detail"] for n in judged[:2]] == js["assessment"]["notes"] and judged[2]["detail"] == js["assessment"]["placebo"]
    assert all(not any(d in n["plain"] for d in DIAGNOSTIC) for n in js["notes"]) and "p = " in judged[0]["detail"]
    assert "p = " in js["notes"][0]["detail"] and "p = " not in js["reason"] and "may have moved" in js["reason"]
    assert "boundary z" in js["statistics_summary"] and "boundary z" not in js["statistics_plain"]

    default = run(verify, args)
    assert default.exit_code == js["verdict_exit_code"], default.output
    found = [d for d in DIAGNOSTIC if d in default.stdout]
    assert not found, (found, default.stdout)
    lines = default.stdout.splitlines()
    for note in judged:  # each note's plain words, with its label; what it means for the verdict (the cap's is the reason)
        assert f"{'placebo' if note['kind'].startswith('placebo-') else 'note'}: {note['plain']}" in lines
    assert "interval was widened to match" in default.stdout

    for flag in ("--verbose", "-v"):
        verbose = run(verify, [*args, flag]).stdout.splitlines()
        for note in js["notes"]:
            plain = f"{'placebo' if note['kind'].startswith('placebo-') else 'note'}: {note['plain']}"
            assert verbose[verbose.index(plain) + 1] == f"  diagnostic: {note['detail']}"
        (stat,) = [line for line in verbose if line.startswith("statistics: ")]
        assert "boundary z = " in stat and "effective samples" in stat

    peek = run(verify, ["--spec", spec, "--initiative", iid, "--peek"])  # the stored verdict keeps its typed notes
    assert f"note: {judged[0]['plain']}" in peek.stdout and "p = " not in peek.stdout

    out = tmp_path / "report"
    assert run(report, ["--spec", spec, "--initiative", iid, "--out", out]).exit_code == 0
    md = (out / f"{iid}.md").read_text()
    from obsctl.escape import markdown_text

    stored = Store(tmp_path / "store").initiative(iid).verifications[-1].notes
    for note in stored:
        assert f": {markdown_text(note.plain)}. Diagnostic: {markdown_text(note.detail)}" in md


def test_snapshot_stationarity_plain_by_default_tests_with_verbose_both_in_json(fake, spec):
    import numpy as np
    from scipy import signal as spsignal

    rng = np.random.default_rng(6)
    n = 40 * 240
    noise = spsignal.lfilter([1.0], [1.0, -0.9], rng.standard_normal(n) * math.sqrt(1 - 0.81))
    fake.value = lambda t: 100.0 + noise[int((t - (END - 30 * HOUR)) // 15) % n]
    default = snap(spec)
    assert default.exit_code == 0, default.output
    (line,) = [x.strip() for x in default.stdout.splitlines() if x.strip().startswith("stationarity: ")]
    assert line in ("stationarity: steady, no step or trend inside the window",) or line.startswith("stationarity: MOVED"), line
    assert not any(d in default.stdout for d in DIAGNOSTIC), default.stdout
    verbose = snap(spec, extra=["--verbose"])
    (full,) = [x.strip() for x in verbose.stdout.splitlines() if x.strip().startswith("stationarity: ")]
    assert "step test p = " in full and "trend test p = " in full and "simulations" in full
    shown = _strict(snap(spec, extra=["-o", "json"]).stdout)["outcomes"][0]["stationarity"]
    assert shown["plain"].startswith("stationarity: ") and "p = " not in shown["plain"] and "step test p = " in shown["summary"]
