"""Fixtures of the fault, TLS and secret tests: one real Prometheus per session serving
the synthetic history of tests/integration (its helpers are loaded from that conftest,
so both suites measure the same data), a fault proxy in front of it, and test PKI.

Specs here use short deadlines (``timeout_seconds: 1``, ``deadline_seconds: 2``) so a
fault mode costs at most about two seconds.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from faultkit import helpers  # noqa: E402
from faultproxy import FaultProxy  # noqa: E402
from support.openssl_certs import SERVER_NAME, make_pki  # noqa: E402

from obsctl.stack import Prometheus, create_blocks_from_openmetrics  # noqa: E402


@pytest.fixture(scope="session")
def fault_history(tmp_path_factory):
    """A real Prometheus (stopped at session end) with the integration suite's backfilled history."""
    work = tmp_path_factory.mktemp("faults-prometheus")
    hist = helpers.build_history(time.time())
    om = work / "history.om"
    helpers.write_openmetrics(hist, om)
    create_blocks_from_openmetrics(om, work / "data")
    prom = Prometheus(workdir=work, data_dir=work / "data")
    try:
        prom.start()
        hist.prometheus_url = prom.url
        yield hist
    finally:
        prom.stop()


@pytest.fixture
def proxy(fault_history):
    """A :class:`FaultProxy` in pass mode in front of the session's Prometheus."""
    with FaultProxy(fault_history.prometheus_url) as p:
        yield p


@pytest.fixture(scope="session")
def pki(tmp_path_factory):
    """CA, server (prometheus.obsctl.test) and client certificates made with openssl."""
    return make_pki(tmp_path_factory.mktemp("pki"), server_sans=f"DNS:{SERVER_NAME}")
