"""The one duration grammar (Prometheus' model.ParseDuration) and the one output style."""

from __future__ import annotations

import pytest

from obsctl.durations import format_duration, parse_duration
from obsctl.errors import UsageError


@pytest.mark.parametrize("text, seconds", [
    ("15s", 15.0), ("500ms", 0.5), ("1h30m", 5400.0), ("7d", 604800.0), ("2w", 1209600.0), ("1y", 31536000.0),
    ("1d2h3m4s5ms", 86400 + 7200 + 180 + 4 + 0.005), ("90s", 90.0),
])
def test_parse_known_answers(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds, rel=1e-12)


@pytest.mark.parametrize("text", ["1m1h", "1.5s", "5", "", "0s", "0", "-1s", "1h 30m", "1H", "101y", "s", "1ms1s"])
def test_parse_refuses(text):
    with pytest.raises(UsageError) as err:
        parse_duration(text, "--window")
    assert str(err.value).startswith("--window: ")


def test_exporter_flags_and_spec_share_the_grammar():
    from obsctl.exporters.main import build_parser
    from obsctl.spec import Verification

    with pytest.raises(ValueError):  # pydantic.ValidationError
        Verification(window="1m1h")
    assert Verification(window="1h30m").window == "1h30m"
    args = build_parser().parse_args(["--scrape.timeout=1m1h"])
    with pytest.raises(UsageError):
        parse_duration(args.scrape_timeout, "--scrape.timeout")


@pytest.mark.parametrize("seconds, text", [
    (0.25, "250ms"), (1, "1s"), (90, "1m30s"), (930, "15m30s"), (3600, "1h"), (5400, "1h30m"), (5890, "1h38m"),
    (21600, "6h"), (1.3e5, "1d12h"), (86399.9, "1d"), (float("inf"), "unbounded"), (0, "0s"),
])
def test_format_known_answers(seconds, text):
    assert format_duration(seconds) == text


@pytest.mark.parametrize("seconds", [1, 59, 61, 3599, 3661, 86401, 200000, 1e6])
def test_format_is_parseable_and_close(seconds):
    text = format_duration(seconds)
    back = parse_duration(text)
    # two units: the error is at most half the smaller unit
    assert abs(back - seconds) <= max(0.5, 0.5 * {"s": 1, "m": 60, "h": 3600}.get(text[-1], 60)) + 1e-9
