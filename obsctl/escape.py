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
========================= =============================================================

Every function maps ``str -> str``, never raises for any ``str`` input, and the result is
one line (line breaks and other control characters cannot start a new heading, rule, YAML
key or log record).
"""

from __future__ import annotations

import html
import re
import string

import yaml

__all__ = ["go_template_text", "html_text", "logfmt_value", "markdown_text", "promql_string", "yaml_comment",
           "yaml_scalar"]

# C0 controls, DEL and C1 controls (U+0080-U+009F), plus the Unicode line and paragraph
# separators that some renderers treat as line breaks.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# CommonMark 0.31 section 2.4: any ASCII punctuation character may be backslash-escaped,
# and an escaped one is always literal text.
_MD_PUNCT = re.compile("([" + re.escape(string.punctuation) + "])")


def _visible_controls(text: str) -> str:
    """Control characters as ``\\n``, ``\\r``, ``\\t``, ``\\xNN`` (ASCII) or ``\\uNNNN`` escapes,
    which Go's string literals read back as the same code point (Go's ``\\x85`` is a byte)."""
    def one(match: re.Match[str]) -> str:
        char = match.group()
        if char in _SHORT:
            return _SHORT[char]
        return f"\\x{ord(char):02x}" if ord(char) < 0x80 else f"\\u{ord(char):04x}"

    return _CONTROL.sub(one, text)


def markdown_text(text: str) -> str:
    """``text`` as literal Markdown text, safe in a paragraph or a table cell.

    Every ASCII punctuation character is backslash-escaped (CommonMark 0.31 section 2.4),
    which leaves no heading (``#``), emphasis, link or image (``[``, ``]``, ``(``), raw HTML
    or autolink (``<``), entity (``&``), list marker or table-cell break (``|``, a GFM
    extension that honours the same escape); line breaks and other control characters
    become one space, and runs of spaces one space, so text cannot start a block (an
    indented code block needs four). Example: ``"## Verdict | <b>"`` -> ``"\\#\\# Verdict \\| \\<b\\>"``.

    No library is used: Markdown renderers parse, they do not escape, and the spec's rule
    is a single substitution.
    """
    flat = re.sub(" {2,}", " ", _CONTROL.sub(" ", text)).strip(" ")
    return _MD_PUNCT.sub(r"\\\1", flat)


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
