"""The data side of a verdict: what was measured over a window, its coverage and the history before it."""
