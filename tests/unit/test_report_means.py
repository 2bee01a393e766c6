"""One baseline mean, shown the same way: the verdict line and the report's table show the
means the verdict was computed with (obsctl.baselining.text.present.judged_means).

The stored summaries drop the oldest ``n mod 10`` samples for their batch means; the
comparison uses every kept sample. With 245 baseline samples whose 5 oldest are 10x the
rest, the two baseline means differ by far more than the formatting rounds away.
"""

from __future__ import annotations

import datetime as dt
import re

import numpy as np

from obsctl.baselining.report import render_markdown
from obsctl.baselining.statistics.summary import summarize
from obsctl.baselining.text.present import judged_means, verdict_line
from obsctl.escape import markdown_text
from obsctl.formatting import format_number
from obsctl.records import Baseline, Initiative, Population, VerificationResult, Window

UTC = dt.UTC
T0 = 1_798_761_600
STEP = 15.0


def _window(start: float, n: int) -> Window:
    return Window(start=dt.datetime.fromtimestamp(start, UTC), end=dt.datetime.fromtimestamp(start + n * STEP, UTC), step_seconds=STEP)


def _record():
    base = np.r_[np.full(5, 10_000.0), np.full(240, 1_000.0)]
    win = np.r_[np.full(7, 20_000.0), np.full(240, 1_200.0)]
    tb, tw = T0 + STEP * np.arange(1, base.size + 1), T0 + 7200 + STEP * np.arange(1, win.size + 1)
    baseline = Baseline(id="a.t.x", workload_class="a", signal="t", unit="tokens/s", direction="higher_is_better", query="sum(x)",
                        window=_window(T0, base.size), population=Population(series_count=1), stats=summarize(base.tolist(), 10),
                        created_at=dt.datetime.fromtimestamp(T0 + 3700, UTC), samples=list(zip(tb.tolist(), base.tolist(), strict=True)))
    # As verify stores it: the comparison's sides are the means of every kept sample.
    b_all, w_all = float(base.mean()), float(win.mean())
    result = VerificationResult(verdict="IMPROVED", primary_verdict="IMPROVED", baseline_id=baseline.id, signal="t",
                                window=_window(T0 + 7200, win.size), baseline_mean=b_all, window_mean=w_all,
                                change_ratio=w_all / b_all - 1, ci_low=0.1, ci_high=0.3, confidence=0.95,
                                window_stats=summarize(win.tolist(), 10), verified_at=dt.datetime.fromtimestamp(T0 + 9000, UTC),
                                samples=list(zip(tw.tolist(), win.tolist(), strict=True)))
    initiative = Initiative(id="i-1", name="i", lever="batch-size", workload_class="a", primary_signal="t", baseline_id=baseline.id,
                            started_at=dt.datetime.fromtimestamp(T0 + 7200, UTC))
    return initiative, baseline, result, (b_all, w_all)


def test_verdict_line_and_report_table_show_the_same_means():
    initiative, baseline, result, (b_all, w_all) = _record()
    # Known answers: (5 x 10,000 + 240 x 1,000) / 245 and (7 x 20,000 + 240 x 1,200) / 247.
    assert b_all == (5 * 10_000 + 240 * 1_000) / 245 and w_all == (7 * 20_000 + 240 * 1_200) / 247
    # The summaries differ (they dropped the oldest 5 and 7 samples), so the test can tell.
    assert format_number(baseline.stats.mean) != format_number(b_all)
    assert format_number(result.window_stats.mean) != format_number(w_all)
    assert judged_means(result) == (b_all, w_all)

    line = verdict_line(result, baseline.unit)
    assert f"baseline {format_number(b_all)} -> window {format_number(w_all)} tokens/s" in line
    md = render_markdown(initiative, baseline, result, "fig.png")
    (row,) = [r for r in md.splitlines() if r.startswith("| mean |")]
    shown = re.fullmatch(r"\| mean \| (.+) \| (.+) \|", row).groups()
    assert shown == (format_number(b_all), format_number(w_all))
    assert f"**{markdown_text(line)}**" in md  # the same line heads the report
