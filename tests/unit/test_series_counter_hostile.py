"""The capped range read's series counter (obsctl.promapi._SeriesCounter) against answers that
could fool it into stopping a legitimate single series: label values holding the key's text
in every escaping JSON allows, a label named ``metric``, and answers formatted by other
backends (indented, spaced, ASCII-escaped)."""

from __future__ import annotations

import json

import pytest

from obsctl.promapi import _SeriesCounter, series_in

HOSTILE = {"__name__": "x", "metric": '"metric":{"metric":', "a": '\\"metric\\":', "b": "}\n{\"metric\": {", "c": "\u202e\"metric\":"}


def _bodies(series: list[dict]) -> list[bytes]:
    answer = {"status": "success", "data": {"resultType": "matrix", "result": series}}
    return [json.dumps(answer, separators=(",", ":")).encode(), json.dumps(answer, indent=2).encode(),
            json.dumps(answer, ensure_ascii=False).encode(), json.dumps(answer, indent="\t", ensure_ascii=False).encode()]


def _stops(body: bytes, max_series: int, size: int) -> bool:
    counter = _SeriesCounter(max_series)
    return any(counter(body[at:at + size]) for at in range(0, len(body), size))


@pytest.mark.parametrize("size", [1, 2, 8, 9, 10, 65536])
def test_one_series_with_hostile_labels_is_never_stopped(size):
    for body in _bodies([{"metric": HOSTILE, "values": [[1, "1"], [2, "2"]]}]):
        assert not _stops(body, 1, size)
        count, labels = series_in(body)
        assert count == 1 and labels == [HOSTILE]


@pytest.mark.parametrize("size", [1, 9, 65536])
def test_several_series_in_any_formatting_are_stopped(size):
    series = [{"metric": {**HOSTILE, "pod": f"p{i}"}, "values": [[1, "1"]]} for i in range(4)]
    for body in _bodies(series):
        assert _stops(body, 1, size)
        assert series_in(body)[0] == 4
