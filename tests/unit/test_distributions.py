"""obsctl.baselining.statistics.distributions: scipy.special's functions, imported lazily."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from scipy import special

from obsctl.baselining.statistics import distributions as dist


@pytest.mark.parametrize(("ours", "theirs", "args"), [
    (dist.ndtr, special.ndtr, (np.linspace(-8, 8, 33),)),
    (dist.ndtri, special.ndtri, (np.linspace(1e-9, 1 - 1e-9, 33),)),
    (dist.stdtrit, special.stdtrit, (np.array([1.0, 2.5, 30.0, 1e4]), 0.975)),
    (dist.chdtr, special.chdtr, (4.0, np.linspace(0, 30, 31))),
    (dist.chdtrc, special.chdtrc, (4.0, np.linspace(0, 30, 31))),
    (dist.fdtr, special.fdtr, (3.0, 50.0, np.linspace(0, 10, 21))),
])
def test_each_function_is_scipy_specials_with_the_same_argument_order(ours, theirs, args):
    np.testing.assert_array_equal(ours(*args), theirs(*args))


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)


def test_the_verify_modules_import_without_scipy_special():
    # The lazy import is what keeps scipy.special's ~0.27 s off the import path.
    out = _run("import sys, obsctl.baselining.verify, obsctl.baselining.commands.cli, obsctl.baselining.plan; "
               "print('scipy.special' in sys.modules)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_prefetch_loads_scipy_special_in_the_background_and_exits_cleanly():
    out = _run("import sys, threading; from obsctl.baselining.statistics import distributions as d; d.prefetch(); d.prefetch(); "
               "names = [t.name for t in threading.enumerate() if t.name.startswith('obsctl-prefetch')]; "
               "print(len(names) <= 1, float(d.stdtrit(10.0, 0.975)))")
    assert out.returncode == 0 and out.stderr == ""
    once, t = out.stdout.split()
    assert once == "True" and float(t) == pytest.approx(2.2281388519649385, rel=1e-9)  # t(10) 97.5 % quantile (R: qt(0.975, 10))

