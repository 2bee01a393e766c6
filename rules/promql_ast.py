"""PromQL as a tree: parse an expression, walk or rewrite it, print it back.

The grammar is Prometheus' (``promql/parser/generated_parser.y``) for what recording rules
and signal queries use: numbers, strings, vector selectors with matchers, range selectors
(``x[5m]``), subqueries (``e[1h:1m]``), ``offset`` and ``@``, function calls, aggregations
(``sum by (l) (e)``, ``sum(e) without (l)``, ``topk(3, e)``), unary minus and binary
operators with ``bool``, ``on``/``ignoring`` and ``group_left``/``group_right``, at
Prometheus' precedence (``^`` > unary and ``* / % atan2`` > ``+ -`` > comparisons >
``and unless`` > ``or``). Parentheses are kept as :class:`Paren` nodes, so
:func:`render` prints what was parsed with the same grouping (whitespace and comments
are not kept).

String literals and matcher values keep their text as written (``"a\\"b"``), so printing
never re-escapes them; :func:`string_value` decodes one.

Errors: :class:`PromQLSyntaxError` (a ``ValueError``) names the position and what was found;
an escape Prometheus' lexer rejects and a tree deeper than :data:`MAX_DEPTH` are syntax errors too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

AGGREGATIONS = frozenset({"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
                          "bottomk", "topk", "quantile"})
_SET_OPS = ("and", "unless")
_KEYWORDS = AGGREGATIONS | {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset", "and", "or",
                            "unless", "atan2"}
_COMPARISONS = ("==", "!=", "<=", ">=", "<", ">")

_TOKEN = re.compile(r"""
    (?P<ws>\s+|\#[^\n]*)
  | (?P<str>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`[^`]*`)
  | (?P<dur>(?:[0-9]+(?:ms|[smhdwy]))+(?![A-Za-z0-9_]))
  | (?P<num>0[xX][0-9a-fA-F]+|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)
  | (?P<colon>:(?=\s*[0-9\]]))
  | (?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
  | (?P<op>==|!=|<=|>=|=~|!~|[-+*/%^<>=,(){}\[\]:@])
""", re.VERBOSE)


#: The deepest tree :func:`parse` returns (levels of nodes; ``a + b + c`` is 3 deep): printing,
#: rewriting and inlining recurse once a level, within Python's default recursion limit.
MAX_DEPTH = 200


class PromQLSyntaxError(ValueError):
    """The text is not PromQL this parser reads (position and what was found in the message)."""


@dataclass
class Matcher:
    """``label op value``; ``value`` is the string literal as written (quotes included)."""

    label: str
    op: str  # = != =~ !~
    value: str

    @property
    def text(self) -> str:
        """The decoded value (``"a\\"b"`` -> ``a"b``)."""
        return string_value(self.value)


@dataclass
class Num:
    text: str


@dataclass
class Str:
    text: str


@dataclass
class Selector:
    """``name{matchers}[range] offset d @ t`` (``name`` None for ``{...}`` alone)."""

    name: str | None
    matchers: list[Matcher] = field(default_factory=list)
    range: str | None = None
    offset: str | None = None
    at: str | None = None


@dataclass
class Subquery:
    expr: Node
    range: str
    step: str  # "" for the default step
    offset: str | None = None
    at: str | None = None


@dataclass
class Call:
    func: str
    args: list[Node]


@dataclass
class Aggregate:
    """``op [by|without (labels)] ([param,] expr)``; ``grouping`` None without a clause."""

    op: str
    expr: Node
    param: Node | None = None
    grouping: tuple[str, tuple[str, ...]] | None = None


@dataclass
class Binary:
    """``lhs op [bool] [on|ignoring (labels)] [group_left|group_right (labels)] rhs``."""

    op: str
    lhs: Node
    rhs: Node
    bool: bool = False
    matching: tuple[str, tuple[str, ...]] | None = None
    group: tuple[str, tuple[str, ...]] | None = None


@dataclass
class Unary:
    op: str
    expr: Node


@dataclass
class Paren:
    expr: Node


Node = Num | Str | Selector | Subquery | Call | Aggregate | Binary | Unary | Paren


_SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\"}
_ESCAPE = re.compile(r"\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{3}|(.)|$)", re.DOTALL)


def string_value(literal: str) -> str:
    """The value of a PromQL string literal (Go escapes, as Prometheus' lexer takes them:
    ``\\a \\b \\f \\n \\r \\t \\v \\\\``, the literal's own quote, ``\\xHH``,
    ``\\uHHHH``, ``\\UHHHHHHHH``; ``\\xHH`` and three octal digits are one byte each, so
    ``"\\xc3\\xa9"`` is ``é``; a backtick string is raw).

    Raises:
        PromQLSyntaxError: an escape Prometheus rejects (``\\q``, ``\\x4``, ``\\"`` in a
            single-quoted string) or a code point that is not one.
    """
    if literal.startswith("`"):
        return literal[1:-1]
    quote_char, body = literal[:1], literal[1:-1]
    out, at = bytearray(), 0
    for m in _ESCAPE.finditer(body):
        out += body[at:m.start()].encode()
        at = m.end()
        text, char = m.group(0), m.group(1)
        if char is not None:
            if char not in _SIMPLE_ESCAPES and char != quote_char:
                raise PromQLSyntaxError(f"unknown escape sequence {text!r} in the string {literal!r}")
            out += _SIMPLE_ESCAPES.get(char, char).encode()
        elif len(text) == 1:
            raise PromQLSyntaxError(f"the string {literal!r} ends in a backslash")
        elif text[1] in "01234567" or text[1] == "x":  # one byte, as in Go: "\xc3\xa9" is é
            code = int(text[1:], 8) if text[1] != "x" else int(text[2:], 16)
            if code > 0xFF:
                raise PromQLSyntaxError(f"the escape {text!r} in the string {literal!r} is not a byte")
            out.append(code)
        else:
            code = int(text[2:], 16)
            if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                raise PromQLSyntaxError(f"the escape {text!r} in the string {literal!r} is not a character")
            out += chr(code).encode()
    out += body[at:].encode()
    return out.decode(errors="replace")  # bytes that are not UTF-8: U+FFFD, as Prometheus shows them


def quote(value: str) -> str:
    """``value`` as a double-quoted PromQL string literal."""
    from obsctl.escape import promql_string

    return f'"{promql_string(value)}"'


class _Parser:
    def __init__(self, text: str):
        self.tokens: list[tuple[str, str, int]] = []
        self.raw: list[str] = []  # each token as written: a label name keeps its case
        at = 0
        while at < len(text):
            m = _TOKEN.match(text, at)
            if not m:
                raise PromQLSyntaxError(f"unexpected character {text[at]!r} at position {at}")
            if m.lastgroup != "ws":  # a subquery's colon is an operator, not a name's first character
                value = m.group(0)
                if m.lastgroup == "ident" and value.lower() in _KEYWORDS:
                    value = value.lower()  # PromQL's keywords and aggregations are case-insensitive
                self.tokens.append(("op" if m.lastgroup == "colon" else m.lastgroup or "", value, at))
                self.raw.append(m.group(0))
            at = m.end()
        self.i = 0

    def peek(self, k: int = 0) -> tuple[str, str, int]:
        j = self.i + k
        return self.tokens[j] if j < len(self.tokens) else ("eof", "", -1)

    def take(self, value: str | None = None, kind: str | None = None) -> str:
        tk, tv, pos = self.peek()
        if (value is not None and tv != value) or (kind is not None and tk != kind):
            raise PromQLSyntaxError(f"expected {value or kind} at position {pos}, found {tv or 'the end'!r}")
        self.i += 1
        return tv

    def label(self) -> str:
        """A label name as written (``Group`` is a label, not the keyword ``group``)."""
        raw = self.raw[self.i] if self.i < len(self.raw) else ""
        self.take(kind="ident")
        return raw

    def accept(self, value: str) -> bool:
        if self.peek()[1] == value and self.peek()[0] in ("op", "ident"):
            self.i += 1
            return True
        return False

    # --- binary levels, lowest first --------------------------------------------------
    _LEVELS: tuple[tuple[str, ...], ...] = (("or",), _SET_OPS, _COMPARISONS, ("+", "-"), ("*", "/", "%", "atan2"))

    def expr(self, level: int = 0) -> Node:
        if level == len(self._LEVELS):
            return self.unary()
        lhs = self.expr(level + 1)
        while self.peek()[1] in self._LEVELS[level] and self.peek()[0] in ("op", "ident"):
            op = self.take()
            is_bool, matching, group = self.modifiers(op)
            lhs = Binary(op, lhs, self.expr(level + 1), is_bool, matching, group)
        return lhs

    def modifiers(self, op: str) -> tuple[bool, tuple | None, tuple | None]:
        """A binary operator's ``bool`` (comparisons only), ``on``/``ignoring`` and
        ``group_left``/``group_right`` modifiers, read after ``op``."""
        is_bool = self.accept("bool")
        if is_bool and op not in _COMPARISONS:
            raise PromQLSyntaxError(f"bool applies to a comparison only, not to {op!r}")
        matching = group = None
        if self.peek()[1] in ("on", "ignoring"):
            kind = self.take()
            matching = (kind, self.labels())
        if self.peek()[1] in ("group_left", "group_right"):
            kind = self.take()
            group = (kind, self.labels() if self.peek()[1] == "(" else ())
        return is_bool, matching, group

    def unary(self) -> Node:
        if self.peek()[1] in ("+", "-") and self.peek()[0] == "op":
            return Unary(self.take(), self.unary())
        return self.power()

    def power(self) -> Node:
        base = self.postfix()
        if self.peek()[1] == "^":
            self.take()
            is_bool, matching, group = self.modifiers("^")
            return Binary("^", base, self.unary(), is_bool, matching, group)
        return base

    def labels(self) -> tuple[str, ...]:
        self.take("(")
        out = []
        while self.peek()[1] != ")":
            out.append(self.label())
            if not self.accept(","):
                break
        self.take(")")
        return tuple(out)

    def postfix(self) -> Node:
        node = self.primary()
        while True:
            if self.peek()[1] == "[":
                self.take("[")
                rng = self.take(kind="dur")
                if self.accept(":"):
                    step = self.take(kind="dur") if self.peek()[0] == "dur" else ""
                    self.take("]")
                    node = Subquery(node, rng, step)
                else:
                    self.take("]")
                    if not isinstance(node, Selector) or node.range or node.offset or node.at:
                        raise PromQLSyntaxError(f"a range [{rng}] needs a vector selector before it (and before its offset or @)")
                    node.range = rng
            elif self.peek()[1] == "offset":
                self.take()
                sign = self.take() if self.peek()[1] == "-" else ""
                self._set(node, "offset", sign + self.take(kind="dur"))
            elif self.peek()[1] == "@":
                self.take()
                sign = self.take() if self.peek()[1] == "-" else ""
                if self.peek()[1] in ("start", "end"):
                    value = self.take()
                    self.take("(")
                    self.take(")")
                    value += "()"
                else:
                    value = self.take(kind="num")
                self._set(node, "at", sign + value)
            else:
                return node

    @staticmethod
    def _set(node: Node, attr: str, value: str) -> None:
        if not isinstance(node, (Selector, Subquery)):
            raise PromQLSyntaxError(f"{attr} applies to a selector or a subquery only")
        setattr(node, attr, value)

    def primary(self) -> Node:
        kind, value, pos = self.peek()
        if kind == "num":
            return Num(self.take())
        if kind == "str":
            string_value(value)  # an escape Prometheus rejects is a syntax error here too
            return Str(self.take())
        if value == "(" and kind == "op":
            self.take()
            inner = self.expr()
            self.take(")")
            return Paren(inner)
        if value == "{" and kind == "op":
            return Selector(None, self.matchers())
        if kind == "ident":
            if value.lower() in ("inf", "nan"):
                return Num(self.take())
            if value in AGGREGATIONS and self.peek(1)[1] in ("(", "by", "without"):
                return self.aggregate()
            self.take()
            if self.peek()[1] == "(":
                self.take("(")
                args = []
                while self.peek()[1] != ")":
                    args.append(self.expr())
                    if not self.accept(","):
                        break
                self.take(")")
                return Call(value, args)
            return Selector(value, self.matchers() if self.peek()[1] == "{" else [])
        raise PromQLSyntaxError(f"unexpected {value or 'end of expression'!r} at position {pos}")

    def aggregate(self) -> Aggregate:
        op = self.take()
        grouping = None
        if self.peek()[1] in ("by", "without"):
            kind = self.take()
            grouping = (kind, self.labels())
        self.take("(")
        first = self.expr()
        param = None
        if self.accept(","):
            param, first = first, self.expr()
        self.take(")")
        if grouping is None and self.peek()[1] in ("by", "without"):
            kind = self.take()
            grouping = (kind, self.labels())
        return Aggregate(op, first, param, grouping)

    def matchers(self) -> list[Matcher]:
        self.take("{")
        out = []
        while self.peek()[1] != "}":
            label = self.label()
            op = self.take()
            if op not in ("=", "!=", "=~", "!~"):
                raise PromQLSyntaxError(f"expected a matcher operator after {label}, found {op!r}")
            value = self.take(kind="str")
            string_value(value)
            out.append(Matcher(label, op, value))
            if not self.accept(","):
                break
        self.take("}")
        return out


def parse(text: str) -> Node:
    """The tree of PromQL ``text``.

    Raises:
        PromQLSyntaxError: not PromQL this parser reads (module doc).
    """
    parser = _Parser(text)
    try:
        node = parser.expr()
    except RecursionError:
        raise PromQLSyntaxError("the expression is nested too deeply to read") from None
    if _depth(node) > MAX_DEPTH:
        raise PromQLSyntaxError(f"the expression is nested too deeply to read (more than {MAX_DEPTH} levels)")
    if parser.peek()[0] != "eof":
        _, value, pos = parser.peek()
        raise PromQLSyntaxError(f"unexpected {value!r} at position {pos}")
    return node


def _children(node: Node) -> list[Node]:
    if isinstance(node, (Paren, Unary, Subquery)):
        return [node.expr]
    if isinstance(node, Call):
        return list(node.args)
    if isinstance(node, Aggregate):
        return [node.expr] + ([node.param] if node.param is not None else [])
    if isinstance(node, Binary):
        return [node.lhs, node.rhs]
    return []


def _depth(root: Node) -> int:
    """Levels of nodes under and including ``root`` (counted without recursing)."""
    deepest, stack = 0, [(root, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in _children(node))
    return deepest


def _labels(kind: str, labels: tuple[str, ...]) -> str:
    return f"{kind} ({', '.join(labels)})"


def render(node: Node) -> str:
    """``node`` as PromQL text (one line; the grouping of :class:`Paren` nodes kept)."""
    if isinstance(node, (Num, Str)):
        return node.text
    if isinstance(node, Paren):
        return f"({render(node.expr)})"
    if isinstance(node, Unary):
        return f"{node.op}{render(node.expr)}"
    if isinstance(node, Selector):
        text = node.name or ""
        if node.matchers or not node.name:
            text += "{" + ",".join(f"{m.label}{m.op}{m.value}" for m in node.matchers) + "}"
        if node.range:
            text += f"[{node.range}]"
        return text + _modifiers(node)
    if isinstance(node, Subquery):
        return f"{render(node.expr)}[{node.range}:{node.step}]" + _modifiers(node)
    if isinstance(node, Call):
        return f"{node.func}({', '.join(render(a) for a in node.args)})"
    if isinstance(node, Aggregate):
        head = node.op + (f" {_labels(*node.grouping)} " if node.grouping else "")
        args = ([render(node.param)] if node.param is not None else []) + [render(node.expr)]
        return f"{head}({', '.join(args)})"
    if isinstance(node, Binary):
        parts = [render(node.lhs), node.op]
        if node.bool:
            parts.append("bool")
        if node.matching:
            parts.append(_labels(*node.matching).replace(" (", "("))
        if node.group:
            parts.append(_labels(*node.group).replace(" (", "("))
        parts.append(render(node.rhs))
        return " ".join(parts)
    raise TypeError(f"not a PromQL node: {node!r}")


def _modifiers(node: Selector | Subquery) -> str:
    return (f" offset {node.offset}" if node.offset else "") + (f" @ {node.at}" if node.at else "")
