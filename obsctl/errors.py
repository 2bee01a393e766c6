"""Errors obsctl reports to the user as one readable line, never as a traceback.

Each error class maps to a process exit code so that pipelines can tell a bad spec
from an unreachable Prometheus from a verdict (verdict codes live in
``obsctl.baselining.verify``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

#: Exit codes shared by every ``obsctl`` command (verdict codes 10-14 are separate).
EXIT_OK = 0
EXIT_FAILURE = 1  # an operation failed (store conflict, refused action)
EXIT_USAGE = 2  # bad spec, bad flag, bad input file
EXIT_UNAVAILABLE = 3  # Prometheus / Alertmanager unreachable or erroring


class ObsctlError(Exception):
    """Base class: ``str(error)`` is the whole message shown to the user.

    Attributes:
        exit_code: process exit code the CLI uses for this error.
    """

    exit_code = EXIT_FAILURE


class SpecError(ObsctlError):
    """The spec file is missing, unreadable or invalid (exit code 2).

    The message names the file, the line where known, the field and what is allowed.
    """

    exit_code = EXIT_USAGE


class UsageError(ObsctlError):
    """A flag or an input file other than the spec is wrong (exit code 2)."""

    exit_code = EXIT_USAGE


class PrometheusUnavailable(ObsctlError):
    """Prometheus (or Alertmanager) could not be reached or returned an error (exit 3)."""

    exit_code = EXIT_UNAVAILABLE


class StoreError(ObsctlError):
    """The baseline store refused an operation or holds an unreadable file (exit 1)."""

    exit_code = EXIT_FAILURE


class WriteError(StoreError):
    """A file (store record, rule file, dashboard, report) could not be written; the old
    content is kept (exit 1)."""


def linked_errors(exc: BaseException, breadth_first: bool = False) -> Iterator[BaseException]:
    """``exc`` and every exception linked to it (its exception arguments, a ``reason``
    attribute, ``__cause__`` and ``__context__``), each once: depth first from the last
    link (the innermost cause first), or ``breadth_first`` (the nearest first)."""
    seen, todo = set(), deque([exc])
    while todo:
        err = todo.popleft() if breadth_first else todo.pop()
        if id(err) in seen:
            continue
        seen.add(id(err))
        yield err
        todo += [a for a in getattr(err, "args", ()) if isinstance(a, BaseException)]
        todo += [r for r in (getattr(err, "reason", None), err.__cause__, err.__context__) if isinstance(r, BaseException)]
