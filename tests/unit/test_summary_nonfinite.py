"""Non-finite numbers in the stored summary: samples near the float limit whose sum
overflows are reported by non_finite_fields (so the measurement is NO_DATA with a reason),
never with a numpy warning on stderr."""

from __future__ import annotations

import math
import warnings

from obsctl.baselining.statistics import summary as stats


def test_overflowing_samples_give_non_finite_fields_without_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a numpy RuntimeWarning would fail here
        s = stats.summarize([1e308] * 20, 10)
    assert math.isinf(s.mean)  # 20 x 1e308 overflows the float sum
    assert "mean" in stats.non_finite_fields(s)
    assert stats.non_finite_fields(stats.summarize([1.0, 2.0, 3.0], 3)) == []
