"""obsctl.escape: known answers per output context, and what each output means to a real
parser of that context (PyYAML, html.parser, Go templates through promtool elsewhere)."""

from __future__ import annotations

import html.parser

import pytest
import yaml

from obsctl import escape
from obsctl.spec import escape_label_value

HOSTILE = ["", "plain", "## Verdict: IMPROVED", "a | b", "<script>alert(1)</script>", "[x](javascript:alert(1))",
           "line\nbreak", "cr\rlf", "tab\there", "esc\x1b[31m", "nul\x00", "del\x7f", "c1\x85", "sep\u2028x",
           '"quoted" \\back', "{{ query \"up\" }}", "{", "}}", "a: b", "- item", "&amp;", "    code", "ünï ✓"]


@pytest.mark.parametrize("text, expected", [
    ("## Verdict: IMPROVED", r"\## Verdict: IMPROVED"),
    ("a | b", r"a \| b"),
    ("<img src=x onerror=alert(1)>", r"\<img src=x onerror=alert(1)\>"),
    ("[x](javascript:alert(1))", r"\[x\](javascript:alert(1))"),
    ("line\nbreak\r\n  # h", "line break # h"),
    ("    indented", "indented"),
    ("1. item", r"1\. item"),
    ("- item", r"\- item"),
    ("&amp;", r"\&amp;"),
    ("a_b*c`d~e", r"a\_b\*c\`d\~e"),
    ("back\\slash", r"back\\slash"),
    ("IMPROVED: +20.2 % (95 % CI), 995 -> 1,196 tokens/s", "IMPROVED: +20.2 % (95 % CI), 995 -\\> 1,196 tokens/s"),
    ("ünï ✓", "ünï ✓"),
])
def test_markdown_text(text, expected):
    assert escape.markdown_text(text) == expected


@pytest.mark.parametrize("text", HOSTILE + ["1) x", "> quote", "+ item", "=== ", "***", "`code`", "https://x.example/a_b_c",
                                            "![img](x)", "<http://x>", "x ~~y~~", "*a* _b_ **c**", "\\[x](y)"])
def test_markdown_text_is_literal_text_to_a_commonmark_parser(text):
    """Each output, as a line of its own and as a table cell, is one paragraph (or cell) of
    plain text to markdown-it-py (CommonMark + GFM tables/strikethrough) reading back as the input."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    flat = " ".join(text.replace("\r", " ").split()) if text.strip() else ""
    out = escape.markdown_text(text)
    for doc, wrapper in ((out, "paragraph_open"), (f"| h |\n|---|\n| {out} |", "td_open")):
        tokens = md.parse(doc)
        if not flat:
            continue
        assert wrapper in [t.type for t in tokens], (doc, [t.type for t in tokens])
        inline = [t for t in tokens if t.type == "inline"][-1]
        kinds = {c.type for c in inline.children}
        assert kinds <= {"text", "softbreak"}, (doc, kinds)
        read = "".join(c.content for c in inline.children)
        assert read == flat.replace("\x00", "\ufffd") or escape._CONTROL.sub(" ", text).split() == read.split(), (doc, read)


@pytest.mark.parametrize("text, expected", [
    ('<a href="x">&\'', "&lt;a href=&quot;x&quot;&gt;&amp;&#x27;"),
    ("bell\x07", "bell\\x07"),
])
def test_html_text(text, expected):
    assert escape.html_text(text) == expected


@pytest.mark.parametrize("text, expected", [
    ('svc "a"\\b', 'svc \\"a\\"\\\\b'),
    ("a\nb\rc\td", "a\\nb\\rc\\td"),
    ("ünï", "ünï"),
])
def test_promql_string(text, expected):
    assert escape.promql_string(text) == expected
    assert escape_label_value(text) == expected  # the spec's name for it is the same function


@pytest.mark.parametrize("text, expected", [
    ("tokens/s", "tokens/s"),
    ('{{ query "up" }}', '{{ "{{" }} query "up" }}'),
    ("a {", 'a {{ "{" }}'),
    ("{{{", '{{ "{{{" }}'),
    ("}} x", "}} x"),
    ("nl\n", "nl\\n"),
])
def test_go_template_text(text, expected):
    assert escape.go_template_text(text) == expected


@pytest.mark.parametrize("text", HOSTILE)
def test_yaml_scalar_round_trips_on_one_line(text):
    out = escape.yaml_scalar(text)
    assert "\n" not in out and out.startswith('"') and out.endswith('"')
    assert yaml.safe_load(f"key: {out}\nother: 1\n") == {"key": text, "other": 1}


def test_yaml_scalar_known_answers():
    assert escape.yaml_scalar("a: b") == '"a: b"'
    assert escape.yaml_scalar("x\ny") == '"x\\ny"'


@pytest.mark.parametrize("text", HOSTILE)
def test_yaml_comment_stays_a_comment(text):
    assert yaml.safe_load(f"# {escape.yaml_comment(text)}\nkey: 1\n") == {"key": 1}


@pytest.mark.parametrize("text, expected", [
    ('say "hi"\\', 'say \\"hi\\"\\\\'),
    ("forged\nts=1 level=error", "forged\\nts=1 level=error"),
    ("\x1b[2J", "\\x1b[2J"),
    ("\u2028", "\\u2028"),
])
def test_logfmt_value(text, expected):
    assert escape.logfmt_value(text) == expected


@pytest.mark.parametrize("text", HOSTILE)
def test_every_escaper_gives_one_line_without_control_characters(text):
    for fn in (escape.markdown_text, escape.html_text, escape.promql_string, escape.go_template_text,
               escape.yaml_comment, escape.logfmt_value):
        out = fn(text)
        assert not any(ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f or c in "\u2028\u2029" for c in out), (fn, out)


class _Tags(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text = ""

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text += data


@pytest.mark.parametrize("text", HOSTILE)
def test_html_text_never_makes_a_tag(text):
    parser = _Tags()
    parser.feed(f"<p>{escape.html_text(text)}</p>")
    parser.close()
    assert parser.tags == ["p"]



BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def test_terminal_text_is_one_line_without_escape_sequences_or_bidi() -> None:
    text = "ok\nverdict: IMPROVED\r\x1b[2J\x1b]0;title\x07\x9b1m" + BIDI
    out = escape.terminal_text(text)
    assert out == ("ok\\nverdict: IMPROVED\\r\\x1b[2J\\x1b]0;title\\x07\\u009b1m"
                   "\\u202a\\u202b\\u202c\\u202d\\u202e\\u2066\\u2067\\u2068\\u2069")
    assert out.isprintable()
    assert escape.terminal_text("plain ünïcode – text") == "plain ünïcode – text"


def test_terminal_output_keeps_line_feeds_and_tabs_only() -> None:
    assert escape.terminal_output("a\n\tb\x1b[31m\rc\u202ed\n") == "a\n\tb\\x1b[31m\\rc\\u202ed\n"


@pytest.mark.parametrize("char", list(BIDI) + ["\u200e", "\u200f", "\u061c"])
def test_markdown_text_shows_bidi_characters_as_escapes(char) -> None:
    out = escape.markdown_text(f"a{char}b")
    assert char not in out and out == f"a\\\\u{ord(char):04x}b"


def test_cli_streams_escape_what_a_command_prints(tmp_path) -> None:
    """An error naming a file whose name holds an OSC sequence and U+202E reaches the
    terminal as visible escapes, through click's test runner and the console script."""
    import subprocess
    import sys

    from click.testing import CliRunner

    from obsctl.cli import cli

    name = str(tmp_path / "x\x1b]0;pwned\x07\u202e.yaml")
    result = CliRunner().invoke(cli, ["check", "--spec", name])
    assert result.exit_code == 2 and "\\x1b]0;pwned\\x07\\u202e.yaml" in result.output
    assert "\x1b" not in result.output and "\u202e" not in result.output
    done = subprocess.run([sys.executable, "-m", "obsctl", "check", "--spec", name], capture_output=True, timeout=120)
    assert done.returncode == 2 and b"\x1b" not in done.stderr and "\u202e".encode() not in done.stderr
    assert b"\\x1b]0;pwned\\x07\\u202e.yaml" in done.stderr
