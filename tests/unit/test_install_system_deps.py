"""scripts/install-system-deps.sh run against stand-in apt-get, dpkg-query, systemctl and id on
a PATH of its own: it stops only the services of packages it installed in this run, and says
what it installs before it installs it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "install-system-deps.sh"
TOOLS = ("prometheus", "promtool", "prometheus-alertmanager", "prometheus-pushgateway", "victoria-metrics",
         "vmalert", "gcc", "openssl")
#: the real commands the script needs besides the stand-ins
REAL = ("bash", "sort", "cat")

STUB = """#!{bash}
PATH=/usr/bin:/bin  # the stand-in's own tools, not the script's PATH
echo "{name} $*" >> "{log}"
echo "CALL {name} $*" >&2
{body}
"""
#: apt-get install marks its packages installed (dpkg state) and puts their commands on PATH
APT = """if [ "$1" = install ]; then
  for arg in "$@"; do
    case "$arg" in -*|install) ;; *) echo "$arg" >> "{state}"
      case "$arg" in prometheus) touch "{bin}/prometheus" "{bin}/promtool";;
        victoria-metrics) touch "{bin}/victoria-metrics" "{bin}/vmalert";; *) touch "{bin}/$arg";; esac
      chmod +x "{bin}"/*;; esac
  done
fi"""
DPKG = """pkg="${{@: -1}}"
grep -qx "$pkg" "{state}" 2>/dev/null && printf installed || exit 1"""


@pytest.fixture()
def host(tmp_path):
    """A host where ``present`` packages are installed (their commands on PATH); returns run()."""
    if shutil.which("bash") is None:
        pytest.skip("bash not found")
    bin_dir, log, state, systemd = tmp_path / "bin", tmp_path / "calls.log", tmp_path / "dpkg", tmp_path / "systemd"
    bin_dir.mkdir()
    systemd.mkdir()
    bash = shutil.which("bash")
    for name in REAL:
        (bin_dir / name).symlink_to(shutil.which(name))
    bodies = {"apt-get": APT.format(state=state, bin=bin_dir), "dpkg-query": DPKG.format(state=state),
              "systemctl": "", "id": 'echo 0'}
    for name, body in bodies.items():
        (bin_dir / name).write_text(STUB.format(bash=bash, name=name, log=log, body=body))
        (bin_dir / name).chmod(0o755)

    def run(present: dict[str, list[str]]) -> tuple[list[str], str]:
        state.write_text("".join(f"{pkg}\n" for pkg in present))
        for commands in present.values():
            for command in commands:
                (bin_dir / command).write_text("")
                (bin_dir / command).chmod(0o755)
        env = {"PATH": str(bin_dir), "OBSCTL_SYSTEMD_DIR": str(systemd), "HOME": str(tmp_path)}
        done = subprocess.run([bash, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60,
                              cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        return (log.read_text().splitlines() if log.exists() else []), done.stderr

    return run


EVERYTHING = {"prometheus": ["prometheus", "promtool"], "prometheus-alertmanager": ["prometheus-alertmanager"],
              "prometheus-pushgateway": ["prometheus-pushgateway"], "victoria-metrics": ["victoria-metrics", "vmalert"],
              "gcc": ["gcc"], "openssl": ["openssl"]}


def test_nothing_missing_runs_nothing(host) -> None:
    calls, _ = host(EVERYTHING)
    assert calls == []


def test_a_missing_compiler_never_touches_the_hosts_services(host) -> None:
    present = {k: v for k, v in EVERYTHING.items() if k != "gcc"}
    calls, _ = host(present)
    assert "apt-get install -y -qq --no-install-recommends gcc" in calls
    assert not [c for c in calls if c.startswith("systemctl")], calls


def test_only_the_services_installed_in_this_run_are_stopped(host) -> None:
    present = {k: v for k, v in EVERYTHING.items() if k not in ("prometheus-pushgateway", "victoria-metrics")}
    calls, _ = host(present)
    assert [c for c in calls if c.startswith("systemctl")] == [
        "systemctl disable --now prometheus-pushgateway", "systemctl disable --now victoria-metrics"]


def test_it_says_what_it_installs_and_stops_before_it_does(host) -> None:
    present = {k: v for k, v in EVERYTHING.items() if k not in ("prometheus-pushgateway", "gcc")}
    _, stderr = host(present)
    lines = stderr.splitlines()
    install = next(i for i, line in enumerate(lines) if line.startswith("CALL apt-get install"))
    told = [line for line in lines[:install] if not line.startswith("CALL")]
    assert told == [
        "installing Debian packages (apt-get install --no-install-recommends): gcc prometheus-pushgateway",
        "then stopping and disabling the services these packages start: prometheus-pushgateway"]


def test_not_root_and_no_sudo_is_one_line_and_installs_nothing(host, tmp_path) -> None:
    (tmp_path / "bin" / "id").write_text("#!" + shutil.which("bash") + "\necho 1000\n")
    env = {"PATH": str(tmp_path / "bin"), "OBSCTL_SYSTEMD_DIR": str(tmp_path / "systemd")}
    (tmp_path / "dpkg").write_text("")
    done = subprocess.run([shutil.which("bash"), str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.startswith("need root (or sudo) to apt-get install: ")
    assert not (tmp_path / "calls.log").exists() or "apt-get" not in (tmp_path / "calls.log").read_text()
