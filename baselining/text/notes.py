"""The statistical notes of a verdict in two renderings: plain words and the full diagnostic.

A note is data (:class:`obsctl.records.Note`): its ``kind``, the signal it is about, and
two texts. The **plain** text is what the person on call reads by default: what the note
means for the verdict and what to do, with no test name, statistic or p-value. The
**detail** is the diagnostic the statistics made (the test, its statistic, p-value and
level, the model): ``verify --verbose``, ``-o json`` and the report show it.

The notes come from the pure verdict (:func:`obsctl.baselining.decide.verdict.decide`) as
typed findings: the window checks and the scale used
(:class:`obsctl.baselining.statistics.assumptions.Finding`), a window check's refusal, the
placebo check, the location judged, a baseline that moved inside its window, the
sequence's level. This module holds every plain wording, keyed by kind (:data:`PLAIN`).
"""

from __future__ import annotations

from collections.abc import Callable

from obsctl.durations import format_duration
from obsctl.escape import terminal_text
from obsctl.records import Note, Tails


def _noisier(ratio: float | None) -> str:
    how = f" (about {ratio:.1f}x its variance)" if ratio is not None else ""
    return (f"the window is noisier than the baseline{how}: its interval was widened to match, so the verdict already allows "
            "for it; nothing to do")


def _own_memory(tau: float | None) -> str:
    how = f" (now at least {format_duration(tau)})" if tau is not None else ""
    return (f"the change altered how long the signal's swings last{how}: the window was judged under its own memory, which "
            "widens the interval; a longer window narrows it")


def _widened(ratio: float | None) -> str:
    how = f" {ratio:.1f}x" if ratio is not None else ""
    return (f"self-check on past periods of this length: the interval was too narrow there, so it was widened{how} here; "
            "the verdict errs on the safe side")


def _unchecked(need: float | None) -> str:
    how = f" (needs {format_duration(need)} of history)" if need is not None else ""
    return (f"self-check on past periods not possible yet{how}: the verdict rests on the signal's memory model alone; it "
            "becomes possible as history accumulates")


def _short(need: float | None) -> str:
    how = f" (at least {format_duration(need)})" if need is not None else ""
    return (f"the change altered how the signal fluctuates and the window is too short to measure the new pattern: no verdict "
            f"yet; verify again with a longer window{how}")


def _memory_long(need: float | None) -> str:
    how = f"at least {format_duration(need)}" if need is not None else "longer"
    return f"the change made the signal's swings last longer: no verdict until the window is {how}; verify again then"


#: Kinds whose plain words are the verdict's reason (a window check refused): the default
#: output shows them on the verdict line, not again as a note.
REASONS = frozenset({"assumption-short", "assumption-memory-long", "assumption-few", "baseline-moved", "baseline-later-level"})

#: The plain words of each kind of note, from the finding's one figure (or None).
PLAIN: dict[str, Callable[[float | None], str]] = {
    "assumption-short": _short,
    "assumption-memory-long": _memory_long,
    "baseline-moved": lambda _: ("the baseline moved inside its own window: every verdict against it is INCONCLUSIVE until a "
                                 "steady period is re-snapshot (the reason gives the command)"),
    "baseline-later-level": lambda _: ("the baseline may have moved inside its own window, and the window against the level "
                                       "it ended at (its part after the likely step, or the end of its trend line) does not give "
                                       "the same verdict: INCONCLUSIVE (the reason says what to re-snapshot)"),
    "assumption-few": lambda _: ("the change made the signal's swings last longer, and the window holds too few independent "
                                 "stretches of them: no verdict yet; verify again with a longer window"),
    "variance-noisier": _noisier,
    "variance-quieter": lambda _: ("the window is steadier than the baseline: it was judged at the baseline's spread, never a "
                                   "narrower one, so the verdict errs on the safe side; nothing to do"),
    "memory-own": _own_memory,
    "memory-batches": lambda batches: (f"the change altered how long the signal's swings last, too long against the window to "
                                       f"measure: the window was judged from the spread of its {batches or 0:.0f} equal parts' "
                                       "means, which needs no model of the swings and gives a wider interval; a longer window "
                                       "narrows it"),
    "memory-kept": lambda _: ("the change may have altered how long the signal's swings last; the baseline's model gives the "
                              "wider interval and was kept, so the verdict errs on the safe side; nothing to do"),
    "scale-own": lambda _: ("the window's spread differs from the baseline's history: the window's own spread sets its "
                            "interval; nothing to do"),
    "level": lambda _: ("this change keeps the confidence level of its first look, so its verdicts stay valid however often "
                        "you look; a changed verification.confidence applies from the next change"),
    "location-trimmed": lambda trim: (f"the signal is spiky: the verdict compares {(trim or 0) * 100:g} % trimmed means, so a few "
                                      "spikes cannot decide it (spec spiky: false compares plain means)"),
    "location-mean": lambda _: ("the baseline is spiky but the spec asks for plain means (spiky: false): a few spikes can move "
                                "the verdict"),
    "placebo-held": lambda _: ("self-check on past periods of this length: the interval held as often as it should, so the "
                               "verdict's stated confidence holds on this signal"),
    "placebo-widened": _widened,
    "placebo-unchecked": _unchecked,
}


def plain_text(kind: str, value: float | None = None) -> str:
    """The plain words of a note of ``kind`` (a key of :data:`PLAIN`).

    Raises:
        KeyError: an unknown kind (every kind a finding can have is worded here).
    """
    return PLAIN[kind](value)


def note_of(kind: str, detail: str, value: float | None = None, subject: str = "") -> Note:
    """The :class:`~obsctl.records.Note` of a finding: its plain words and its diagnostic ``detail``."""
    return Note(kind=kind, subject=subject, plain=plain_text(kind, value), detail=detail)


def label(kind: str) -> str:
    """The line's label of a note of ``kind``: ``placebo``, ``location`` or ``note``."""
    return next((name for name in ("placebo", "location") if kind.startswith(name + "-")), "note")


def note_lines(notes: list[Note], verbose: bool = False, skip: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """Text lines of ``notes``: ``note: <plain>`` (``placebo:`` for the placebo check,
    ``location:`` for the location judged, :func:`label`; ``guard <signal>: note: <plain>``
    for a guard's), each followed by ``  diagnostic: <detail>`` when ``verbose``. A note
    whose detail is in ``skip`` (already shown) is left out, and so, unless ``verbose``, is
    one whose plain words are the verdict's reason (:data:`REASONS`). The texts come from a
    record file: each is shown as one terminal field (:func:`obsctl.escape.terminal_text`)."""
    lines = []
    for n in notes:
        if n.detail in skip or n.kind in REASONS and not verbose:
            continue
        who = f"guard {terminal_text(n.subject)}: " if n.subject else ""
        lines.append(f"{who}{label(n.kind)}: {terminal_text(n.plain)}")
        if verbose:
            lines.append(f"  diagnostic: {terminal_text(n.detail)}")
    return lines


def tails_plain(tails: Tails | None) -> str:
    """A snapshot's tails in plain words, where verdicts will judge a trimmed mean (the full
    test: :func:`obsctl.baselining.measure.tails.tails_line`); "" otherwise."""
    if tails is None or tails.memory is None:
        return ""
    return (f"spiky ({tails.outliers:,} of {tails.samples:,} samples far from the median): verdicts against it compare "
            f"{tails.trim * 100:g} % trimmed means, so a few spikes cannot decide them (spec spiky: false for plain means)")
