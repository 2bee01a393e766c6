"""Kubernetes objects for generated artefacts: metadata, label parsing, size limits, YAML text.

``obsctl rules generate --format prometheusrule`` and ``obsctl dashboards build --format
configmap`` write their output as Kubernetes objects through these helpers, so both follow the
same rules:

* label keys and values are checked as the API server checks them (a qualified name with an
  optional DNS-subdomain prefix; a value of at most 63 characters of ``[A-Za-z0-9_.-]``,
  alphanumeric at both ends) and are always written as YAML strings (``release: "1"`` stays a
  string, which the API server requires);
* an object must fit ``kubectl apply``'s client-side last-applied annotation: the API server
  refuses an object whose annotations total more than 256 KiB (``TotalAnnotationSizeLimitB``), and
  client-side apply copies the whole object as compact JSON into one annotation. Objects are
  measured as that JSON.
"""

from __future__ import annotations

import json
import re

import yaml

from obsctl.errors import UsageError

#: kube-apiserver's limit on the total size of an object's annotations (bytes).
ANNOTATION_LIMIT_BYTES = 256 * 1024
#: Room left for the annotation's key and the fields kubectl adds beside the copied object.
APPLY_HEADROOM_BYTES = 4 * 1024
#: The largest object (compact JSON bytes) that still fits client-side ``kubectl apply``.
APPLY_LIMIT_BYTES = ANNOTATION_LIMIT_BYTES - APPLY_HEADROOM_BYTES

_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$")
_OBJECT_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

#: Labels every generated object carries (the recommended app.kubernetes.io set).
COMMON_LABELS = {"app.kubernetes.io/name": "obsctl", "app.kubernetes.io/part-of": "obsctl",
                 "app.kubernetes.io/managed-by": "obsctl"}


def check_label_key(key: str, option: str) -> str:
    """``key`` if it is a valid label or annotation key, else :class:`UsageError` naming ``option``."""
    prefix, _, name = key.rpartition("/")
    if not _NAME.match(name) or (prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix))):
        raise UsageError(f"{option} {key!r}: not a Kubernetes label key (name [A-Za-z0-9_.-], at most 63 "
                         "characters, alphanumeric at both ends, optional DNS-subdomain prefix and '/')")
    return key


def parse_labels(pairs: tuple[str, ...] | list[str], option: str = "--label") -> dict[str, str]:
    """``("k=v", ...)`` from the command line as ``{k: v}``, each key and value checked.

    Raises:
        UsageError: a pair without ``=``, an invalid key or value (one line naming the option).
    """
    labels: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise UsageError(f"{option} {pair!r}: expected KEY=VALUE, e.g. {option} release=kube-prometheus-stack")
        check_label_key(key, option)
        if not _VALUE.match(value):
            raise UsageError(f"{option} {pair!r}: not a Kubernetes label value (at most 63 characters of "
                             "[A-Za-z0-9_.-], alphanumeric at both ends, or empty)")
        labels[key] = value
    return labels


def check_object_name(name: str, option: str) -> str:
    """``name`` if it is a DNS-subdomain object name (namespaces too), else :class:`UsageError`."""
    if len(name) > 253 or not _OBJECT_NAME.match(name):
        raise UsageError(f"{option} {name!r}: not a Kubernetes name (lower-case alphanumerics, '-' and '.')")
    return name


def metadata(name: str, labels: dict[str, str], annotations: dict[str, str] | None = None,
             namespace: str | None = None) -> dict:
    """An object's ``metadata``: the common labels, then ``labels`` (which may override them)."""
    meta: dict = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = {**COMMON_LABELS, **labels}
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta


def apply_size(obj: dict) -> int:
    """Bytes of ``obj`` as client-side apply copies it into its last-applied annotation."""
    return len(json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


class BlockDumper(yaml.SafeDumper):
    """SafeDumper writing multi-line strings (PromQL, dashboard JSON) as ``|`` blocks; the rule files
    (``obsctl.rules.render``) and the Kubernetes objects are written with it."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


BlockDumper.add_representer(str, _str)


def dump_object(obj: dict, header: str) -> str:
    """``header`` (comment lines) and ``obj`` as one YAML document; key order kept, strings that YAML
    would read as numbers or booleans quoted (SafeDumper's resolver does that)."""
    return header + yaml.dump(obj, Dumper=BlockDumper, sort_keys=False, allow_unicode=True, width=1 << 16)
