"""Escapers for untrusted text, one per output context.

Text that obsctl did not write itself (label values from Prometheus, spec fields, record
fields, server messages) goes out through exactly one of these, chosen by where it lands:

========================= =============================================================
function                  context
========================= =============================================================
:func:`markdown_text`     Markdown paragraph text and table cells (CommonMark / GFM)
:func:`html_text`         HTML text and double-quoted attribute values
:func:`promql_string`     inside a double-quoted PromQL string (label matcher values)
:func:`go_template_text`  literal text in a Go ``text/template`` (Prometheus annotations)
:func:`yaml_scalar`       a one-line YAML scalar
:func:`yaml_comment`      the text of a one-line YAML ``#`` comment
:func:`logfmt_value`      inside a double-quoted logfmt value (go-kit log)
:func:`alertmanager_value` inside a double-quoted Alertmanager matcher value (routes)
:func:`terminal_text`     one field of a line printed to a terminal
:func:`terminal_output`   whole text printed to a terminal (the CLI's streams, last line of defence)
========================= =============================================================

Every function maps ``str -> str``, never raises for any ``str`` input, and the result is
one line (line breaks and other control characters cannot start a new heading, rule, YAML
key or log record), except :func:`terminal_output`, which keeps the line breaks obsctl wrote.

Bidirectional formatting characters (U+202A-U+202E embeddings and overrides, U+2066-U+2069
isolates, and the marks U+200E, U+200F, U+061C) reorder what a terminal or a Markdown
renderer shows ("Trojan Source", CVE-2021-42574): terminal and Markdown text show them as
``\u202e`` escapes instead.
"""

from __future__ import annotations

import html
import re

import yaml

__all__ = ["alertmanager_value", "go_template_text", "html_text", "logfmt_value", "markdown_text", "promql_string",
           "terminal_output", "terminal_text", "yaml_comment", "yaml_scalar"]

# C0 controls, DEL and C1 controls (U+0080-U+009F), plus the Unicode line and paragraph
# separators that some renderers treat as line breaks.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# Bidirectional embeddings, overrides and isolates, and the invisible direction marks.
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
# What a terminal must not receive even in whole output: every control character but the
# line feed and tab obsctl writes itself (ESC starts CSI/OSC sequences, CR overwrites a line).
_TERMINAL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
# CommonMark 0.31 section 2.4: an ASCII punctuation character after a backslash is literal.
# Escaped are only those that open an inline construct anywhere in a line: code spans,
# emphasis, links and images, raw HTML and autolinks, entities, GFM table cells and
# strikethrough (and the backslash itself), so ordinary text stays readable.
_MD_INLINE = re.compile(r"([\\`*_\[\]<>&|~])")
# What opens a block when it starts a line: ATX headings, block quotes, list markers,
# setext/thematic-break characters, and an ordered-list number.
_MD_BLOCK_START = re.compile(r"^([#>+\-=])|^(\d{1,9})([.)])")


def _visible_controls(text: str) -> str:
    """Control characters as ``\\n``, ``\\r``, ``\\t``, ``\\xNN`` (ASCII) or ``\\uNNNN`` escapes,
    which Go's string literals read back as the same code point (Go's ``\\x85`` is a byte)."""
    return _CONTROL.sub(_escape_char, text)


def _escape_char(match: re.Match[str]) -> str:
    """One matched character as ``\\n``, ``\\r``, ``\\t``, ``\\xNN`` or ``\\uNNNN``."""
    char = match.group()
    if char in _SHORT:
        return _SHORT[char]
    return f"\\x{ord(char):02x}" if ord(char) < 0x80 else f"\\u{ord(char):04x}"


def terminal_text(text: str) -> str:
    """``text`` as one field of a terminal line: control characters (line breaks that would
    forge a line, ESC that starts a CSI/OSC sequence, CR) and bidirectional formatting
    characters become visible escapes (``\\n``, ``\\x1b``, ``\\u202e``); everything else is
    shown as it is. Example: ``"ok\\nverdict: IMPROVED"`` -> ``"ok\\\\nverdict: IMPROVED"``."""
    return _BIDI.sub(_escape_char, _visible_controls(text))


def terminal_output(text: str) -> str:
    """Whole text for a terminal (several lines): as :func:`terminal_text`, except that line
    feeds and tabs stay. What the CLI writes to stdout and stderr goes through it, so a field
    no presenter escaped still cannot send an escape sequence or reorder a line; it cannot
    keep a line break in a field from starting a new line (:func:`terminal_text` does)."""
    return _TERMINAL.sub(_escape_char, text)


def markdown_text(text: str) -> str:
    """``text`` as literal Markdown text, safe in a paragraph or a table cell.

    The characters that open an inline construct are backslash-escaped (CommonMark 0.31
    section 2.4): code (`````), emphasis (``*``, ``_``), links and images (``[``, ``]``), raw
    HTML and autolinks (``<``, ``>``), entities (``&``), GFM table cells (``|``) and
    strikethrough (``~``), and ``\\`` itself; so is a first character that would open a
    block (``#``, ``>``, ``+``, ``-``, ``=``, or the ``.`` / ``)`` after an ordered list's number). Line breaks
    and other control characters become one space, and runs of spaces one space, so text
    cannot start a block of its own (an indented code block needs four); bidirectional
    formatting characters are shown as ``\\u202e`` (escaped like any backslash). Other punctuation
    is left as it is, so reports stay readable. Example: ``"## Verdict | <b>"`` ->
    ``"\\## Verdict \\| \\<b\\>"``; checked against a CommonMark parser (markdown-it-py) in
    the tests.

    No library is used: Markdown renderers parse, they do not escape, and the spec's rule
    is a single substitution.
    """
    flat = re.sub(" {2,}", " ", _CONTROL.sub(" ", _BIDI.sub(_escape_char, text))).strip(" ")
    inline = _MD_INLINE.sub(r"\\\1", flat)
    return _MD_BLOCK_START.sub(lambda m: f"\\{m[1]}" if m[1] else f"{m[2]}\\{m[3]}", inline, count=1)


def html_text(text: str) -> str:
    """``text`` for HTML text or a double-quoted attribute value (``&<>"'`` as entities,
    :func:`html.escape`); control characters become visible escapes."""
    return html.escape(_visible_controls(text), quote=True)


def promql_string(text: str) -> str:
    """``text`` for inside a double-quoted PromQL string literal (label matcher value).

    PromQL strings follow Go's escapes: backslash and double quote are escaped, and newline,
    carriage return, tab and other control characters become ``\\n``, ``\\r``, ``\\t``,
    ``\\xNN`` or ``\\uNNNN`` (a raw line break ends the literal in PromQL's lexer).
    Example: ``'svc "a"\\b'`` -> ``'svc \\"a\\"\\\\b'``.
    """
    return _visible_controls(text.replace("\\", "\\\\").replace('"', '\\"'))


def go_template_text(text: str) -> str:
    """``text`` as literal text in a Go ``text/template`` (Prometheus alert annotations).

    Only ``{{`` opens an action, but a lone ``{`` next to a following action would form one,
    so every run of ``{`` is written as a string constant action that prints it:
    ``"a {{ b"`` -> ``'a {{ "{{" }} b'`` (renders ``a {{ b``). Control characters become
    visible escapes. Nothing else in the text means anything to the template.
    """
    return re.sub(r"\{+", lambda m: '{{ "' + m.group() + '" }}', _visible_controls(text))


def yaml_scalar(text: str) -> str:
    """``text`` as a one-line double-quoted YAML scalar, by PyYAML's emitter (which
    escapes ``"``, ``\\`` and every non-printable character): ``'a: b'`` -> ``'"a: b"'``."""
    dumped = yaml.safe_dump(text, default_style='"', width=float("inf"), allow_unicode=True)
    return dumped.removesuffix("\n...\n").rstrip("\n")


def yaml_comment(text: str) -> str:
    """``text`` for after ``#`` in a one-line YAML comment: control characters (a line
    break would end the comment and start YAML) become visible escapes."""
    return _visible_controls(text)


def logfmt_value(text: str) -> str:
    """``text`` for inside a double-quoted logfmt value: ``\\`` and ``"`` escaped, control
    characters (terminal escapes, line breaks that would forge a record) as ``\\n`` / ``\\xNN``."""
    return _visible_controls(text.replace("\\", "\\\\").replace('"', '\\"'))


def alertmanager_value(text: str) -> str:
    """``text`` for inside a double-quoted Alertmanager matcher value (``owner="..."`` in a
    route's ``matchers``): ``\\`` and ``"`` are backslash-escaped and a line break is
    ``\\n``, the escapes Alertmanager's matcher parser reads back (pkg/labels/parse.go,
    ``ParseMatcher``); other characters stand for themselves there, and the route file's
    YAML emitter quotes what YAML needs. Example: ``'a "b"'`` -> ``'a \\"b\\"'``.
    """
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
