#!/usr/bin/env bash
# Install the Debian packages obsctl's tests and demo run for real: Prometheus (with
# promtool), Alertmanager and Pushgateway, VictoriaMetrics (single node, vmagent, vmalert: the
# backend past one Prometheus), plus gcc for the stand-in NVML library.
# Does nothing when they are already installed. Says which packages it installs (and which
# services it will stop) before it installs anything.
#
# Debian's packages start their services through systemd where it runs; the tests and the
# demo start their own instances on free ports. So the service of a package that THIS run
# installed is stopped and disabled again; a package that was installed before is never
# touched, nor is its service (the host may be running it).
# OBSCTL_SYSTEMD_DIR: the directory whose presence means systemd runs (default
# /run/systemd/system; the tests point it elsewhere).
set -euo pipefail

need=()
command -v prometheus >/dev/null || need+=(prometheus)
command -v promtool >/dev/null || need+=(prometheus)
command -v prometheus-alertmanager >/dev/null || need+=(prometheus-alertmanager)
command -v prometheus-pushgateway >/dev/null || need+=(prometheus-pushgateway)
command -v victoria-metrics >/dev/null || need+=(victoria-metrics)
command -v vmalert >/dev/null || need+=(victoria-metrics)
command -v gcc >/dev/null || need+=(gcc)
command -v openssl >/dev/null || need+=(openssl)  # test certificates (tests/faults/certs.py)
[ ${#need[@]} -eq 0 ] && exit 0
mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)

installed() {  # whether the Debian package $1 is installed now
  [ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null || true)" = installed ]
}

# Packages that ship a service, and whether each was installed before this run.
services=(prometheus prometheus-alertmanager prometheus-pushgateway victoria-metrics)
fresh=()
for pkg in "${need[@]}"; do
  for svc in "${services[@]}"; do
    if [ "$pkg" = "$svc" ] && ! installed "$pkg"; then fresh+=("$pkg"); fi
  done
done

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "need root (or sudo) to apt-get install: ${need[*]}" >&2; exit 1; }
  sudo=sudo
fi
echo "installing Debian packages (apt-get install --no-install-recommends): ${need[*]}" >&2
if [ ${#fresh[@]} -gt 0 ]; then
  echo "then stopping and disabling the services these packages start: ${fresh[*]}" >&2
fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}"

systemd_dir=${OBSCTL_SYSTEMD_DIR:-/run/systemd/system}
if [ ${#fresh[@]} -gt 0 ] && command -v systemctl >/dev/null && [ -d "$systemd_dir" ]; then
  for svc in "${fresh[@]}"; do
    if installed "$svc"; then  # installed by this run: its service was started by it
      echo "stopping and disabling $svc.service (installed by this run)" >&2
      $sudo systemctl disable --now "$svc" >/dev/null 2>&1 || true
    fi
  done
fi
