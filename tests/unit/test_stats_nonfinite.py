"""Non-finite numbers in the statistics (BREAKER 11): samples near the float limit whose
sum overflows, and non-finite stored summaries, must give NO_DATA with a reason, never
a +nan interval, and never a numpy warning on stderr."""

from __future__ import annotations

import math
import warnings

from obsctl.baselining import stats
from obsctl.baselining.models import Statistics


def _summary(mean: float, batch_means: list[float]) -> Statistics:
    return Statistics(sample_count=len(batch_means) * 2, mean=mean, median=mean, p5=mean, p95=mean, stddev=1.0, batch_means=batch_means)


def test_overflowing_samples_give_non_finite_fields_without_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a numpy RuntimeWarning would fail here
        s = stats.summarize([1e308] * 20, 10)
    assert math.isinf(s.mean)  # 20 x 1e308 overflows the float sum
    assert "mean" in stats.non_finite_fields(s)
    assert stats.non_finite_fields(stats.summarize([1.0, 2.0, 3.0], 3)) == []


def test_assess_non_finite_baseline_or_window_is_no_data():
    good = _summary(10.0, [9.0, 11.0, 10.0, 10.5])
    bad = _summary(math.inf, [math.inf, 1.0, 2.0, 3.0])
    verdict, reason, estimate = stats.assess(bad, good, 4, 0.95, "higher_is_better", 0.02)
    assert (verdict, estimate) == ("NO_DATA", None)
    assert reason == "the baseline's mean, median, p5, p95, batch_means are not finite (values overflow the float range)"
    verdict, reason, _ = stats.assess(good, bad, 4, 0.95, "higher_is_better", 0.02)
    assert verdict == "NO_DATA" and "window's" in reason


def test_assess_overflowing_ratio_is_inconclusive_without_nan():
    # Finite means whose ratio (1e300 / 1e-10) overflows: no +nan interval.
    tiny = _summary(1e-10, [0.9e-10, 1.1e-10, 1.0e-10, 1.05e-10])
    huge = _summary(1e300, [0.9e300, 1.1e300, 1.0e300, 1.05e300])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        verdict, reason, estimate = stats.assess(tiny, huge, 4, 0.95, "higher_is_better", 0.02)
    assert verdict == "INCONCLUSIVE"
    assert "overflows" in reason
    assert estimate.change_ratio is None and estimate.ci_low is None and estimate.ci_high is None
