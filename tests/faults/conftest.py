"""Fixtures of the fault, TLS and secret tests: a fault proxy in front of the session's
Prometheus (``history``, in tests/conftest.py: the same data tests/integration measures)
and test PKI.

Specs here use short deadlines (``timeout_seconds: 1``, ``deadline_seconds: 2``) so a
fault mode costs at most about two seconds.
"""

from __future__ import annotations

import pytest

from support.faultproxy import FaultProxy
from support.openssl_certs import SERVER_NAME, make_pki


@pytest.fixture
def proxy(history):
    """A :class:`FaultProxy` in pass mode in front of the session's Prometheus."""
    with FaultProxy(history.prometheus_url) as p:
        yield p


@pytest.fixture(scope="session")
def pki(tmp_path_factory):
    """CA, server (prometheus.obsctl.test) and client certificates made with openssl."""
    return make_pki(tmp_path_factory.mktemp("pki"), server_sans=f"DNS:{SERVER_NAME}")
