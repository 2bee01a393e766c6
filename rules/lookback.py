"""How far back a PromQL expression reads: its look-back, through the recording rules it reads.

A sample of ``rate(x[5m])`` at ``t`` reads ``x`` over ``(t - 5m, t]``; so, after a change
at ``t0``, the signal holds only the new state from ``t0 + 5m`` on. The look-back of an
expression (seconds) is, conservatively:

- the longest plain range selector (``x[5m]``: 300),
- plus every subquery's range (``max_over_time(rate(x[5m])[1h:1m])``: the inner rate is
  read over the hour before: 3600 + 300),
- plus the largest ``offset`` (``x offset 10m``: 600; a negative offset reads ahead and adds nothing),
- plus, for a recorded series it reads (``workload_class:obsctl_tokens:rate5m``), the
  look-back of the rule expressions that record it (the chain is followed to its raw
  series; a cycle counts each rule once).

The sum over subqueries and the maximum over branches overestimate an expression whose
subqueries sit in different branches (the bound is then safe, not tight). A recording
rule's own evaluation interval (up to a minute) and the staleness look-back of an
instant selector (a gauge changes with its next scrape) are not counted.

The catalogue's recording rules are those :mod:`obsctl.rules.generate` writes for a spec
(:func:`recording_rules`); :func:`signal_lookback` reads a signal's query through them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from obsctl.durations import format_duration, parse_duration
from obsctl.errors import UsageError
from obsctl.spec import Spec

#: PromQL string literals ("...", '...', `...`): a label value may hold ``[5m]`` or a metric name.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
#: A range ``[5m]`` (group 2) or a subquery ``[1h:1m]`` (group 3 set), after what it applies to (group 1: a metric name, if any).
_RANGE = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)?(?:\{[^{}]*\})?\s*\[\s*([0-9][0-9A-Za-z]*)\s*(:[^\]]*)?\]")
#: ``offset 5m`` / ``offset -5m``.
_OFFSET = re.compile(r"\boffset\s+(-?)\s*([0-9][0-9A-Za-z]*)")
#: A metric name token.
_NAME = re.compile(r"(?<![A-Za-z0-9_:])([A-Za-z_:][A-Za-z0-9_:]*)")
#: An equality matcher ``label="value"`` in a selector.
_EQ = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class Lookback:
    """The look-back of one expression.

    Attributes:
        seconds: how far back a sample reads (s), 0 for instant selectors only.
        source: what gives it, in words (``the 5m range of vllm:generation_tokens_total``,
            ``... recorded as workload_class:obsctl_tokens:rate5m``); "" when 0.
    """

    seconds: float
    source: str = ""


def _seconds(text: str) -> float | None:
    try:
        return parse_duration(text, "range")
    except UsageError:
        return None


def _words(seconds: float) -> str:
    return format_duration(seconds)


def own_lookback(query: str) -> Lookback:
    """The look-back of ``query`` itself, recorded series counted as instant (module doc).

    ``sum(rate(a[5m])) / sum(rate(b[1m]))`` -> 300 s (``the 5m range of a``);
    ``max_over_time(rate(x[5m])[1h:1m])`` -> 3900 s; ``x offset 10m`` -> 600 s.
    """
    text = _STRING.sub('""', query)
    plain, plain_of, sub = 0.0, "", 0.0
    for match in _RANGE.finditer(text):
        seconds = _seconds(match.group(2))
        if seconds is None:
            continue
        if match.group(3):
            sub += seconds
        elif seconds > plain:
            plain, plain_of = seconds, match.group(1) or ""
    offset = max((s for sign, d in _OFFSET.findall(text) if not sign and (s := _seconds(d)) is not None), default=0.0)
    total = plain + sub + offset
    if total <= 0:
        return Lookback(0.0)
    parts = []
    if plain:
        parts.append(f"the {_words(plain)} range" + (f" of {plain_of}" if plain_of else ""))
    if sub:
        parts.append(f"{_words(sub)} of subquery range")
    if offset:
        parts.append(f"an offset of {_words(offset)}")
    return Lookback(total, " + ".join(parts))


def _names(query: str) -> set[str]:
    return set(_NAME.findall(_STRING.sub('""', query)))


def _matchers(query: str, name: str) -> list[dict[str, str]]:
    """The equality matchers of each selector of ``name`` in ``query`` (``[{}]`` for a bare name)."""
    out = []
    for match in re.finditer(rf"(?<![A-Za-z0-9_:]){re.escape(name)}(?![A-Za-z0-9_:])\s*(\{{(?:[^{{}}\"]|\"(?:[^\"\\\\]|\\\\.)*\")*\}})?", query):
        out.append(dict(_EQ.findall(match.group(1) or "")))
    return out or [{}]


@dataclass(frozen=True)
class Rule:
    """One recording rule: the series it records, its expression, its static labels, and
    where it is evaluated: its group's name and its place in that group (0 first)."""

    record: str
    expr: str
    labels: Mapping[str, str]
    group: str = ""
    position: int = 0


def rules_for(query: str, rules: Iterable[Rule]) -> list[Rule]:
    """The rules whose records ``query`` reads, narrowed by the query's equality matchers
    on the rule's static labels (``x{workload_class="a"}`` reads the rule labelled ``a``,
    not the one labelled ``b``)."""
    by_name: dict[str, list[Rule]] = {}
    for rule in rules:
        by_name.setdefault(rule.record, []).append(rule)
    out = []
    for name in sorted(_names(query) & by_name.keys()):
        selectors = _matchers(query, name)
        for rule in by_name[name]:
            if any(all(rule.labels.get(k, v) == v for k, v in sel.items()) for sel in selectors):
                out.append(rule)
    return out


def lookback(query: str, rules: Iterable[Rule] = (), _seen: frozenset[int] = frozenset()) -> Lookback:
    """The look-back of ``query`` through the recording ``rules`` it reads (module doc).

    ``sum(workload_class:obsctl_tokens:rate5m{workload_class="a"})`` with the rule
    recording it from ``sum(rate(vllm:generation_tokens_total[5m]))`` -> 300 s
    (``the 5m range of vllm:generation_tokens_total, recorded as workload_class:obsctl_tokens:rate5m``).
    """
    rules = list(rules)
    best = own_lookback(query)
    own = best.seconds
    for rule in rules_for(query, rules):
        if id(rule) in _seen:
            continue
        inner = lookback(rule.expr, rules, _seen | {id(rule)})
        if inner.seconds and own + inner.seconds > best.seconds:
            via = f"{inner.source}, recorded as {rule.record}" if inner.source else f"recorded as {rule.record}"
            best = Lookback(own + inner.seconds, f"{best.source} + {via}" if own else via)
    return best


def metric_selectors(query: str) -> list[str]:
    """The vector selectors of ``query`` as written (``name``, ``name{...}`` or ``{...}``), in order, unique.

    ``sum by (le) (rate(a_bucket{job="x"}[5m])) / b`` -> ``['a_bucket{job="x"}', 'b']``."""
    masked = _STRING.sub(lambda m: '"' + "_" * (len(m.group(0)) - 2) + '"', query)  # same length: positions hold
    masked = _GROUPING.sub(lambda m: " " * len(m.group(0)), masked)
    braces = {b.start(): b.end() for b in re.finditer(r"\{[^{}]*\}", masked)}
    inside = [(a, b) for a, b in braces.items()]
    out: list[str] = []
    used: set[int] = set()
    for m in _NAME.finditer(masked):
        name, at = m.group(1), m.start()
        if name in _KEYWORDS or any(a < at < b for a, b in inside) or re.match(r"\s*\(", masked[m.end():]):
            continue
        rest = masked[m.end():]
        gap = len(rest) - len(rest.lstrip())
        brace = m.end() + gap
        selector = name
        if brace in braces:
            selector = name + query[brace:braces[brace]]
            used.add(brace)
        if selector not in out:
            out.append(selector)
    for a, b in braces.items():
        if a not in used and not re.search(r"[A-Za-z0-9_:]\s*$", masked[:a]) and query[a:b] not in out:
            out.append(query[a:b])
    return out


def raw_selectors(query: str, rules: Iterable[Rule] = (), _seen: frozenset[int] = frozenset()) -> list[str]:
    """The selectors of raw (not recorded) series ``query`` reads, through the rules, sorted and unique.

    ``sum(workload_class:obsctl_tokens:rate5m{workload_class="a"})`` -> the selectors of the
    rule labelled ``a`` (``vllm:generation_tokens_total{model_name="m"}``)."""
    rules = list(rules)
    recorded = {r.record for r in rules}
    out = {s for s in metric_selectors(query) if s.partition("{")[0] not in recorded}
    for rule in rules_for(query, rules):
        if id(rule) not in _seen:
            out.update(raw_selectors(rule.expr, rules, _seen | {id(rule)}))
    return sorted(out)


#: Words of PromQL that look like metric names outside a call.
_KEYWORDS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool", "and", "or", "unless", "inf", "nan",
                       "Inf", "NaN", "atan2"})
#: A grouping or matching clause: its label list holds no metric name.
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")


def recording_rules(spec: Spec) -> list[Rule]:
    """The recording rules obsctl generates for ``spec`` (``make generate``, :func:`obsctl.rules.generate.generate`):
    the signals', the sources', saturation, cost, GPU and training rules."""
    from obsctl.rules.cost import cost_groups
    from obsctl.rules.gpu import gpu_groups
    from obsctl.rules.saturation import saturation_groups
    from obsctl.rules.signals import signal_groups
    from obsctl.rules.sources import source_groups
    from obsctl.rules.training import training_groups

    groups = [*signal_groups(spec), *source_groups(spec), *saturation_groups(spec), *cost_groups(spec), *gpu_groups(), *training_groups(spec)]
    return [Rule(r["record"], str(r["expr"]), dict(r.get("labels") or {}), g["name"], i)
            for g in groups for i, r in enumerate(g["rules"]) if "record" in r]


def signal_lookback(spec: Spec, query: str, rules: list[Rule] | None = None) -> Lookback:
    """The look-back of a signal's ``query`` through the spec's recording rules (:func:`recording_rules`)."""
    return lookback(query, recording_rules(spec) if rules is None else rules)
