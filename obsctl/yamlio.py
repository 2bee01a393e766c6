"""Reading the YAML files users write (the spec, the exporter config) safely.

PyYAML's ``safe_load`` is safe against code execution but not against the rest of what
a hand-written or hostile file can hold, so this module adds, on top of PyYAML's
SafeLoader (no parser of our own):

* aliases are refused: a "billion laughs" alias chain builds an exponentially large
  document for anything that walks it (pydantic, our line index);
* duplicate mapping keys are errors (PyYAML silently keeps the last one);
* nesting too deep for the composer is a readable error, not a RecursionError;
* only regular files up to :data:`MAX_BYTES` are read (``/dev/zero`` or a FIFO would hang);
* every key's and item's line is recorded, so validation errors can name the line.
"""

from __future__ import annotations

import os
import re
import stat
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from obsctl.errors import ObsctlError

MAX_BYTES = 4 * 1024 * 1024  # a spec is a few KiB; 4 MiB leaves room and bounds memory

#: ``{path of keys and list indexes: 1-based line}``; ``()`` is the document.
LineIndex = dict[tuple[object, ...], int]


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases and duplicate keys (errors carry the line)."""

    def compose_node(self, parent, index):  # noqa: ANN001 (PyYAML's signature)
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, f"YAML aliases (*{event.anchor}) are not supported here; write the value out", event.start_mark
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):  # noqa: ANN001
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first at line {seen[key]})", key_node.start_mark
                )
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def read_text(path: Path, error: type[ObsctlError], what: str) -> str:
    """Read a user's YAML file as UTF-8 text.

    Raises:
        error: missing, a directory, not a regular file, larger than MAX_BYTES, unreadable
            or not UTF-8; the message names ``path`` (and the line for bad UTF-8).
    """
    try:
        info = path.stat()
        if stat.S_ISDIR(info.st_mode):
            raise error(f"{path}: is a directory, expected a YAML {what}")
        if not stat.S_ISREG(info.st_mode):
            raise error(f"{path}: is not a regular file; the {what} must be a YAML file")
        if info.st_size > MAX_BYTES:
            raise error(f"{path}: {info.st_size} bytes is too large for a {what} (at most {MAX_BYTES})")
        raw = path.read_bytes()
    except FileNotFoundError:
        raise error(f"{path}: {what} not found") from None
    except OSError as exc:
        raise error(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise error(f"{path}:{line}: {what} is not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})") from None


def parse(text: str, path: Path, error: type[ObsctlError]) -> tuple[Any, LineIndex]:
    """Parse one YAML document strictly; returns ``(data, line index)``.

    Raises:
        error: syntax error, alias, duplicate key or excessive nesting, as
            ``<path>:<line>: YAML ...: <problem>``.
    """
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise error(f"{where}: YAML syntax error: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise error(f"{path}: YAML syntax error: {str(exc).splitlines()[0]}") from None
    except RecursionError:
        raise error(f"{path}: YAML nesting too deep to read") from None
    finally:
        loader.dispose()
    return data, _line_index(node)


def load_file(path: str | os.PathLike[str], error: type[ObsctlError], what: str) -> tuple[Any, LineIndex]:
    """:func:`read_text` then :func:`parse`."""
    path = Path(path)
    return parse(read_text(path, error, what), path, error)


def _line_index(root: yaml.Node | None) -> LineIndex:
    index: LineIndex = {}
    # Iterative walk: the tree is alias-free, and depth is bounded by what the composer accepted.
    stack: list[tuple[yaml.Node, tuple[object, ...]]] = [(root, ())] if root is not None else []
    while stack:
        node, path = stack.pop()
        index.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                index[path + (key_node.value,)] = key_node.start_mark.line + 1
                stack.append((value_node, path + (key_node.value,)))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                stack.append((item, path + (i,)))
    return index


def validation_message(path: Path, exc: ValidationError, lines: LineIndex, root: type[BaseModel]) -> str:
    """One line for a pydantic error on a YAML file: ``<path>:<line>: <field>: <problem>``,
    naming the allowed keys for an unknown key; further errors are summarised after it.

    Args:
        path: the file, as the user named it.
        exc: the error from ``root.model_validate``.
        lines: the file's line index (:func:`parse`).
        root: the model the file was validated against (for the allowed keys).
    """
    messages = []
    for err in exc.errors():
        # Drop pydantic's validator tags ("function-after[...]") from the location.
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and ("[" in p or p.startswith("function-"))))
        msg = err["msg"].removeprefix("Value error, ")
        reference = re.match(r"^(\w+)\[(\d+)\]\.(\w+) (.*)$", msg) if not loc else None
        if reference:  # model-level cross-reference errors name their own field
            loc = (reference.group(1), int(reference.group(2)), reference.group(3))
            msg = reference.group(4)
        line = next((lines[loc[:cut]] for cut in range(len(loc), -1, -1) if loc[:cut] in lines), None)
        where = f"{path}:{line}" if line else str(path)
        field = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".") or "(top level)"
        if err["type"] == "extra_forbidden":
            msg = f"unknown key; allowed here: {', '.join(allowed_keys(root, loc[:-1]))}"
        elif err["type"] == "literal_error":
            msg = f"{msg} (got {err.get('input')!r})"
        messages.append(f"{where}: {field}: {msg}")
    more = f" (and {len(messages) - 1} more: " + "; ".join(messages[1:4]) + ")" if len(messages) > 1 else ""
    return messages[0] + more


def allowed_keys(root: type[BaseModel], loc: tuple[object, ...]) -> list[str]:
    """Keys allowed in the mapping at ``loc`` below ``root`` (list indexes skipped, the
    user's own keys of a ``dict[str, Model]`` skipped; ``path`` is not a YAML key)."""
    model, i = root, 0
    while i < len(loc):
        part = loc[i]
        i += 1
        if isinstance(part, int):
            continue
        field = model.model_fields.get(str(part))
        if field is None:
            break
        annotation = field.annotation
        if typing.get_origin(annotation) is dict:
            annotation = typing.get_args(annotation)[1]
            i += 1  # the next part is a user's key (a UUID, a namespace)
        inner = typing.get_args(annotation) or (annotation,)
        candidates = [a for a in inner if isinstance(a, type) and issubclass(a, BaseModel)]
        if not candidates:
            break
        model = candidates[0]
    return [name for name in model.model_fields if name != "path"]
