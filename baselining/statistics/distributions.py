"""The distribution functions the verdicts use: scipy.special's, imported on first use.

Every quantile and tail probability of the statistics (normal, Student t, chi-square, F)
is scipy.special's own ufunc, the ones ``scipy.stats``' distributions call underneath
(``scipy.stats`` itself costs seconds to import and is never loaded). Only the import is
handled here, in one place:

- scipy >= 1.15 builds an array-API compatibility layer when ``scipy.special`` is first
  imported (it walks numpy's namespace, loading ``numpy.f2py`` and more): about 0.27 s
  on the benchmark machine, a fifth of a whole ``obsctl verify`` on a 30-day baseline
  (bench/bench_store_verify.py, docs/benchmarks-verify.md).
- :func:`prefetch` starts that import on a background thread when a command that will
  need it begins, so it overlaps the store reads and the Prometheus requests (I/O that
  releases the GIL) instead of adding to them. The first call of any function below
  waits for it (Python's per-module import lock), so results never depend on timing.

The functions accept and return what the scipy.special ufuncs do (floats or numpy arrays,
elementwise); see scipy's documentation of each for the exact definitions.
"""

from __future__ import annotations

import threading
from types import ModuleType

_special: ModuleType | None = None
_prefetched = False
_lock = threading.Lock()


def _sp() -> ModuleType:
    global _special
    if _special is None:
        from scipy import special

        _special = special
    return _special


def _warm() -> None:
    try:
        _sp()
    except Exception:  # noqa: BLE001 - the caller's own first use raises it where it can be reported
        pass


def prefetch() -> None:
    """Start importing scipy.special on a background thread (once per process; no-op after).

    The thread is not a daemon, so the interpreter waits for the import to finish at exit
    instead of tearing it down mid-import on an early error path."""
    global _prefetched
    with _lock:
        if _prefetched or _special is not None:
            return
        _prefetched = True
    threading.Thread(target=_warm, name="obsctl-prefetch-scipy", daemon=False).start()


def ndtr(x):
    """Standard normal CDF (``scipy.special.ndtr``)."""
    return _sp().ndtr(x)


def ndtri(p):
    """Standard normal quantile, the inverse of :func:`ndtr` (``scipy.special.ndtri``)."""
    return _sp().ndtri(p)


def stdtrit(dof, p):
    """Student t quantile with ``dof`` degrees of freedom (``scipy.special.stdtrit``)."""
    return _sp().stdtrit(dof, p)


def chdtr(dof, x):
    """Chi-square CDF (``scipy.special.chdtr``)."""
    return _sp().chdtr(dof, x)


def chdtrc(dof, x):
    """Chi-square survival function (``scipy.special.chdtrc``; NaN below the support, unlike ``chi2.sf``)."""
    return _sp().chdtrc(dof, x)


def fdtr(dof_num, dof_den, x):
    """F distribution CDF (``scipy.special.fdtr``)."""
    return _sp().fdtr(dof_num, dof_den, x)
