"""Shared pieces of every ``obsctl`` command: options, output and error handling.

Commands raise :class:`obsctl.errors.ObsctlError` subclasses; :func:`run_main` turns
them into one ``obsctl: error: ...`` line on stderr and the error's exit code, so a user
never sees a traceback for a condition we know about.

Everything a command writes to stdout and stderr passes :func:`terminal_streams`, which
shows control characters (but line feed and tab) and bidirectional formatting characters
as visible escapes (:func:`obsctl.escape.terminal_output`): text a presenter did not
escape cannot move the cursor, retitle the window, write hyperlinks or reorder a line.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import sys
from collections.abc import Callable, Iterator
from typing import Any

import click

from obsctl.errors import EXIT_USAGE, ObsctlError
from obsctl.escape import terminal_output
from obsctl.spec import DEFAULT_SPEC_PATH, SPEC_ENV, Spec, load_spec

spec_option = click.option(
    "--spec",
    "spec_path",
    envvar=SPEC_ENV,
    default=DEFAULT_SPEC_PATH,
    show_default=True,
    type=click.Path(dir_okay=True, path_type=str),
    help=f"Spec file (YAML). Also read from ${SPEC_ENV}.",
)

output_option = click.option(
    "--output",
    "-o",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text for people, json for pipelines (one JSON document on stdout).",
)


class TerminalStream:
    """A text stream whose ``write`` passes text through :func:`obsctl.escape.terminal_output`;
    bytes and every other attribute go to ``stream`` unchanged."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: Any) -> int:
        if isinstance(text, str):
            self._stream.write(terminal_output(text))
            return len(text)
        return self._stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def terminal_streams() -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` as :class:`TerminalStream` for the block (nested: once)."""
    saved = sys.stdout, sys.stderr
    if not isinstance(sys.stdout, TerminalStream):
        sys.stdout = TerminalStream(sys.stdout)
    if not isinstance(sys.stderr, TerminalStream):
        sys.stderr = TerminalStream(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def load(spec_path: str) -> Spec:
    """Load the spec given by ``--spec`` (raises SpecError, exit code 2)."""
    return load_spec(spec_path)


def emit_json(payload: Any) -> None:
    """Write one JSON document to stdout (datetimes and paths as strings).

    NaN and infinities become ``null``: they are not JSON, and strict parsers reject them.
    """
    global _emitted
    click.echo(json.dumps(_finite(payload), indent=2, sort_keys=True, default=str, allow_nan=False))
    _emitted = True


#: Whether this process printed a JSON document already (run_main then adds no error document).
_emitted = False


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def progress(message: str) -> None:
    """A progress line on stderr (stdout stays parseable)."""
    click.echo(message, err=True)


def run_main(command: click.Command, argv: list[str] | None = None) -> None:
    """Invoke a click command, mapping ObsctlError to one line on stderr and its exit code."""
    global _emitted
    _emitted = False
    with terminal_streams():
        _run(command, argv)


def _run(command: click.Command, argv: list[str] | None) -> None:
    try:
        rc = command.main(args=argv, prog_name="obsctl", standalone_mode=False)
        # With standalone_mode=False click returns ctx.exit(n)'s code instead of exiting.
        if isinstance(rc, int) and rc:
            sys.exit(rc)
    except ObsctlError as exc:
        click.echo(f"obsctl: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        # click turns Ctrl-C (and EOF at a prompt) into Abort.
        _interrupted("aborted", argv)
    except click.UsageError as exc:
        # One line like every other obsctl error, plus where to look for the right usage.
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
        if wants_json(sys.argv[1:] if argv is None else argv):
            emit_json(error_document(exc.format_message() + hint, EXIT_USAGE))
        click.echo(f"obsctl: error: {exc.format_message()}{hint}", err=True)
        sys.exit(EXIT_USAGE)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code if exc.exit_code else EXIT_USAGE)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        _interrupted("interrupted", argv)


#: Exit code of a command stopped by Ctrl-C (128 + SIGINT, as shells report it).
EXIT_INTERRUPTED = 130


def _interrupted(message: str, argv: list[str] | None) -> None:
    # A pipeline asking for JSON still gets one document saying the command did not finish.
    if wants_json(sys.argv[1:] if argv is None else argv) and not _emitted:
        emit_json(error_document(message, EXIT_INTERRUPTED))
    click.echo(f"obsctl: {message}", err=True)
    sys.exit(EXIT_INTERRUPTED)


class ObsctlClickError(click.ClickException):
    """An ObsctlError carried through click: same one-line message and exit code."""

    def __init__(self, error: ObsctlError):
        super().__init__(str(error))
        self.exit_code = error.exit_code

    def show(self, file: Any = None) -> None:
        click.echo(f"obsctl: error: {self.format_message()}", err=True)


def error_document(message: str, exit_code: int) -> dict:
    """The JSON document a failed command prints on stdout with ``--output json``."""
    return {"error": message, "exit_code": exit_code}


def wrap_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator of every command: re-raise ObsctlError as ClickException with the same
    exit code (one line on stderr, no traceback) and, with ``--output json``, print
    :func:`error_document` on stdout first, so a pipeline always gets one document.

    A command that already printed its own document for the error sets
    ``exc.reported = True`` before raising."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ObsctlError as exc:
            if kwargs.get("output") == "json" and not getattr(exc, "reported", False):
                emit_json(error_document(str(exc), exc.exit_code))
            raise ObsctlClickError(exc) from None

    return wrapper


def wants_json(argv: list[str]) -> bool:
    """True when ``argv`` asks for ``--output json`` (``-o json``, ``--output=json``, ``-ojson``)."""
    for i, arg in enumerate(argv):
        if arg in ("--output=json", "-ojson") or (arg in ("-o", "--output") and i + 1 < len(argv) and argv[i + 1] == "json"):
            return True
    return False
