"""Every server a test or the demo starts keeps its state in the folder it is given: the
start commands of support.servers' Prometheus, Alertmanager and Pushgateway and of the tests'
VictoriaMetrics and vmalert (captured, not run) set their state paths inside the test's
folder, and ``spawn`` refuses a server command that would fall back to its package's
default (Debian's Pushgateway: /var/lib/prometheus/pushgateway.data, the host's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from obsctl.errors import ObsctlError
from support import servers
from support import victoriametrics as vm


@pytest.fixture
def captured(monkeypatch):
    """The argv of every spawn_ready call (nothing is started)."""
    calls: list[list[str]] = []

    def fake(name, label, argv, workdir, url, timeout, ready_path="/-/ready"):
        calls.append(list(argv))
        return None

    monkeypatch.setattr(servers, "spawn_ready", fake)
    monkeypatch.setattr(vm, "spawn_ready", fake)
    monkeypatch.setattr(servers, "require_binary", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(vm, "require_binary", lambda name: f"/usr/bin/{name}")
    return calls


def flag(argv: list[str], name: str) -> str:
    (value,) = [a.partition("=")[2] for a in argv if a.partition("=")[0] == name]
    return value


def test_every_server_start_sets_its_state_path_inside_the_tests_folder(captured, tmp_path) -> None:
    servers.Prometheus(tmp_path / "prom").start()
    servers.Alertmanager(tmp_path / "am").start()
    servers.Pushgateway(tmp_path / "pg").start()
    vm.VictoriaMetrics(tmp_path / "vm").start()
    vm.VMAlert(tmp_path / "vmalert", [], datasource="http://x", remote_write="http://x", alertmanager="http://x").start()
    started = {Path(argv[0]).name: argv for argv in captured}
    assert set(started) == {"prometheus", "prometheus-alertmanager", "prometheus-pushgateway", "victoria-metrics", "vmalert"}
    paths = {name: flag(argv, f) for name, argv in started.items() for f in servers.STATE_FLAGS[name]
             if f != "--cluster.listen-address"}
    assert set(paths) == {"prometheus", "prometheus-alertmanager", "prometheus-pushgateway", "victoria-metrics"}
    for name, path in paths.items():
        assert Path(path).is_relative_to(tmp_path), (name, path)
    assert flag(started["prometheus-alertmanager"], "--cluster.listen-address") == ""
    assert all(servers.state_problem(argv) == "" for argv in captured)


@pytest.mark.parametrize(("argv", "missing"), [
    (["prometheus-pushgateway", "--web.listen-address=127.0.0.1:1"], "--persistence.file=<folder of this run>"),
    (["/usr/bin/prometheus", "--config.file=x"], "--storage.tsdb.path=<folder of this run>"),
    (["prometheus-alertmanager", "--storage.path=am"], "--cluster.listen-address= (empty: no cluster listener)"),
    (["prometheus-alertmanager", "--storage.path=am", "--cluster.listen-address=0.0.0.0:9094"],
     "--cluster.listen-address= (empty: no cluster listener)"),
    (["victoria-metrics", "-storageDataPath="], "-storageDataPath=<folder of this run>"),
])
def test_spawn_refuses_a_server_without_its_state_path(tmp_path, argv, missing) -> None:
    with pytest.raises(ObsctlError, match="would keep state outside its folder") as err:
        servers.spawn("server", argv, tmp_path)
    assert missing in str(err.value)
    assert not (tmp_path / "server.log").exists()  # nothing was started


def test_other_programs_and_vmalert_need_no_state_flag() -> None:
    assert servers.state_problem(["promtool", "check", "rules", "x"]) == ""
    assert servers.state_problem(["vmalert", "-rule=x"]) == ""
    assert servers.state_problem(["/usr/bin/python3", "-m", "obsctl.exporters.main"]) == ""
