#!/usr/bin/env bash
# Install the Debian packages obsctl's tests and demo run for real: Prometheus (with
# promtool), Alertmanager and Pushgateway, VictoriaMetrics (single node, vmagent, vmalert: the
# backend past one Prometheus), plus gcc for the stand-in NVML library.
# Does nothing when they are already installed.
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

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "need root (or sudo) to apt-get install: ${need[*]}" >&2; exit 1; }
  sudo=sudo
fi
echo "installing Debian packages: ${need[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $(printf '%s\n' "${need[@]}" | sort -u)
# Debian's packages start the services through systemd where it runs; the tests start
# their own instances on free ports, so stop the package's ones if they were started.
if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
  $sudo systemctl disable --now prometheus prometheus-alertmanager prometheus-pushgateway victoria-metrics >/dev/null 2>&1 || true
fi
