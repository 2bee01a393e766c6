"""The slow multi-scale noise of bench/bench_drift.py for the unit tests: AR(1)s with memories
of a minute, 20 minutes and about 7 hours at a 60 s step (phi 0.5 / 0.95 / 0.995, sds 3 / 3 / 2 %)."""

from __future__ import annotations

import math

import numpy as np
from scipy import signal as spsignal

#: ``(phi at 60 s, marginal sd)`` of each component.
COMPONENTS = ((0.5, 0.03), (0.95, 0.03), (0.995, 0.02))


def ar1(rng: np.random.Generator, phi: float, sd: float, n: int) -> np.ndarray:
    """A stationary AR(1) with marginal sd ``sd``, shape ``(n,)``: the first value from the marginal law."""
    e = rng.normal(0.0, sd * math.sqrt(1 - phi**2), n)
    e[0] = rng.normal(0.0, sd)
    return spsignal.lfilter([1.0], [1.0, -phi], e)


def multi_scale(rng: np.random.Generator, n: int) -> np.ndarray:
    """The sum of the :data:`COMPONENTS` over ``n`` steps of 60 s (log units, mean 0), shape ``(n,)``."""
    return sum(ar1(rng, phi, sd, n) for phi, sd in COMPONENTS)
