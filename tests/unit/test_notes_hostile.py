"""Hostile text in a verdict's notes (a record file edited or written elsewhere: a guard's
signal name, a diagnostic, an older record's note): one terminal line per note with control,
escape and bidirectional characters shown as escapes, and a Markdown report line that
cannot open a block, a code span or raw HTML."""

from __future__ import annotations

import sys
from pathlib import Path

from obsctl.baselining.text import notes as N
from obsctl.baselining.text.present import note_lines

sys.path.insert(0, str(Path(__file__).parent))
from test_plain_notes import result_with  # noqa: E402  (a verification record carrying given notes)

FORGED = "x\nverdict: IMPROVED\x1b[2J\r\u202eevil"


def _safe_terminal(line: str) -> bool:
    return not any(c in line for c in "\n\r\x1b\u202e")


def test_a_hostile_guard_name_and_diagnostic_stay_on_their_terminal_line():
    result = result_with([N.note_of("memory-kept", FORGED)], [N.note_of("scale-own", FORGED, subject=FORGED)])
    for verbose in (False, True):
        lines = note_lines(result, verbose=verbose)
        assert len(lines) == (4 if verbose else 2)
        assert all(_safe_terminal(line) for line in lines), lines
    assert "  diagnostic: x\\nverdict: IMPROVED\\x1b[2J\\r\\u202eevil" in note_lines(result, verbose=True)


def test_an_older_records_hostile_note_stays_on_its_terminal_line():
    result = result_with([])
    result.assessment.notes = [FORGED]
    (line,) = note_lines(result, verbose=False)
    assert _safe_terminal(line) and line.startswith("note: x\\nverdict")


def test_a_hostile_guard_name_cannot_break_out_of_the_reports_line():
    from obsctl.baselining.report import _statistics_lines

    subject = "a` <img src=x onerror=alert(1)>\n# Verdict: IMPROVED"
    result = result_with([N.note_of("memory-kept", "d")], [N.note_of("scale-own", "d", subject=subject)])
    (guard,) = [line for line in _statistics_lines(result) if line.startswith("- Guard ")]
    assert "\n" not in guard and "<" not in guard.replace("\\<", "")  # no raw HTML
    assert "a\\` " in guard and guard.count("`") == guard.count("\\`")  # no code span left open
