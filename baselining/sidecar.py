"""The store's sample sidecars: bulk ``(time, value)`` samples out of the YAML records.

Why: a 30-day baseline at 60 s holds 43,200 samples; inline YAML made it 4.2 MB and
every listing parsed them. A record's YAML keeps its metadata (plain, readable) and a
``samples_sidecar`` mapping; the samples live in one file next to it.

Format (``FORMAT``): a NumPy ``.npz`` archive (a zip of ``.npy`` arrays, deflate
compressed, level :data:`COMPRESS_LEVEL`, as ``numpy.savez_compressed`` writes it; https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html),
read with ``allow_pickle=False``. Each sample list of the record (every ``samples`` key
in the record, e.g. ``samples`` of a baseline, ``verifications.0.guards.1.samples`` of an
initiative) is one entry ``e<n>``:

- on an implicit time grid (every time is ``t0 + k * step`` for integers ``k``):
  ``e<n>_grid`` = float64 ``[t0, step]`` and ``e<n>_gaps`` = uint32 differences of ``k``
  (first one from 0; a run without holes is all 1s and compresses to almost nothing);
- otherwise ``e<n>_times`` = float64 unix seconds;
- ``e<n>_values`` = float64 values (bit-exact: a round trip returns the same floats).

The YAML's mapping::

    samples_sidecar:
      file: <record stem>.<sha256[:12]>.samples.npz   # next to the YAML
      format: obsctl-samples-npz/1
      sha256: <hex of the whole file>
      entries: [{path: samples, key: e0, count: 43200}]

Atomicity: the sidecar's name carries its content hash, so it is written (atomically)
*before* the YAML that names it and a replaced YAML's old sidecar is removed only after
the new YAML is in place: a crash leaves at worst an unreferenced sidecar, never a YAML
pointing at a missing or half-written one. Sample lists shorter than 64 pairs stay inline in the
YAML (no ``samples_sidecar``).
"""

from __future__ import annotations

import hashlib
import io
import math
import zipfile
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

from obsctl.atomicio import atomic_write_bytes
from obsctl.errors import StoreError

FORMAT = "obsctl-samples-npz/1"
KEY = "samples_sidecar"
#: Sample lists shorter than this stay inline in the YAML (a sidecar would cost more).
INLINE_MAX = 64
#: Deflate level of the sidecar members. Level 1 halves the write time of level 6 (what
#: ``savez_compressed`` uses) at the same size: float noise does not compress much at any
#: level, the hole-free ``gaps`` runs compress to almost nothing at every level.
COMPRESS_LEVEL = 1


def sample_paths(data: Any, prefix: tuple = ()) -> list[tuple]:
    """Paths (tuples of keys and list indexes) of every ``samples`` list in a dumped record."""
    out: list[tuple] = []
    if isinstance(data, dict):
        for key, value in data.items():
            if key == "samples" and isinstance(value, list):
                out.append((*prefix, key))
            elif isinstance(value, (dict, list)):
                out += sample_paths(value, (*prefix, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            if isinstance(value, (dict, list)):
                out += sample_paths(value, (*prefix, i))
    return out


def _get(data: Any, path: tuple) -> Any:
    for part in path:
        data = data[part]
    return data


def _set(data: Any, path: tuple, value: Any) -> None:
    for part in path[:-1]:
        data = data[part]
    data[path[-1]] = value


def _path_text(path: tuple) -> str:
    return ".".join(str(p) for p in path)


def _parse_path(text: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in text.split("."))


class Columns(list):
    """A sample list with its columns already as float64 arrays ``times``, ``values``
    (the same floats; :func:`encode` uses them instead of converting the tuples)."""

    def __init__(self, samples: list, times: np.ndarray, values: np.ndarray):
        super().__init__(samples)
        if times.shape != (len(samples),) or values.shape != (len(samples),):
            raise ValueError("columns do not match the samples")
        self.times, self.values = times, values


def encode(samples: list) -> dict[str, np.ndarray]:
    """Arrays of one sample list (see module doc), keys without the ``e<n>_`` prefix."""
    if isinstance(samples, Columns):
        times, values = np.asarray(samples.times, dtype=np.float64), np.asarray(samples.values, dtype=np.float64)
    else:
        # fromiter per column: ~4x faster than asarray of a list of tuples (the same floats).
        times = np.fromiter(map(itemgetter(0), samples), dtype=np.float64, count=len(samples))
        values = np.fromiter(map(itemgetter(1), samples), dtype=np.float64, count=len(samples))
    out: dict[str, np.ndarray] = {"values": values}
    if times.size >= 2:
        diffs = np.diff(times)
        step = float(diffs.min())
        t0 = float(times[0])
        if step > 0:
            k = np.rint((times - t0) / step)
            # Exact reconstruction is required (t0 + k*step must give the same float).
            if np.array_equal(t0 + k * step, times) and k[-1] < 2**32:
                out["grid"] = np.array([t0, step])
                out["gaps"] = np.diff(k, prepend=0).astype(np.uint32)
                return out
    out["times"] = times
    return out


def decode(arrays: dict[str, np.ndarray]) -> list[tuple[float, float]]:
    """The sample list back from :func:`encode`'s arrays."""
    values = arrays["values"]
    if "grid" in arrays:
        t0, step = (float(x) for x in arrays["grid"])
        times = t0 + np.cumsum(arrays["gaps"].astype(np.float64)) * step
    else:
        times = arrays["times"]
    return list(zip(times.tolist(), values.tolist(), strict=True))


def _long_samples(model: BaseModel, prefix: tuple = ()) -> tuple[list[tuple[tuple, list]], dict]:
    """``([(path, samples)], pydantic exclude)`` of a model's ``samples`` lists of :data:`INLINE_MAX` or more."""
    found: list[tuple[tuple, list]] = []
    exclude: dict = {}
    for name in type(model).model_fields:
        value = getattr(model, name)
        if name == "samples" and isinstance(value, list) and len(value) >= INLINE_MAX:
            found.append(((*prefix, name), value))
            exclude[name] = True
        elif isinstance(value, BaseModel):
            sub_found, sub = _long_samples(value, (*prefix, name))
            found += sub_found
            if sub:
                exclude[name] = sub
        elif isinstance(value, list):
            per_item = {}
            for i, item in enumerate(value):
                if isinstance(item, BaseModel):
                    sub_found, sub = _long_samples(item, (*prefix, name, i))
                    found += sub_found
                    if sub:
                        per_item[i] = sub
            if per_item:
                exclude[name] = per_item
    return found, exclude


def dump(model: BaseModel) -> tuple[dict, list[tuple[tuple, list]]]:
    """``(JSON-mode dump with the long sample lists left empty, [(path, samples)])``.

    The long lists are not serialized by pydantic (43,200 pairs cost ~0.1 s there);
    :func:`split` encodes them straight from the model's tuples."""
    found, exclude = _long_samples(model)
    data = model.model_dump(mode="json", exclude=exclude or None)
    for path, _ in found:
        _set(data, path, [])
    return data, found


def split(data: dict, stem: str, raw: list[tuple[tuple, list]] = ()) -> tuple[dict, bytes | None, str | None]:
    """Move a record's sample lists into sidecar bytes: ``raw`` (from :func:`dump`) and
    any list of :data:`INLINE_MAX` or more pairs still inline in ``data``.

    Returns:
        ``(yaml data, sidecar bytes or None, sidecar file name or None)``; no sidecar
        when every list is shorter than :data:`INLINE_MAX`.
    """
    lists = list(raw) + [(p, _get(data, p)) for p in sample_paths(data) if len(_get(data, p)) >= INLINE_MAX]
    if not lists:
        return data, None, None
    arrays: dict[str, np.ndarray] = {}
    entries = []
    for n, (path, samples) in enumerate(lists):
        for name, arr in encode(samples).items():
            arrays[f"e{n}_{name}"] = arr
        entries.append({"path": _path_text(path), "key": f"e{n}", "count": len(samples)})
        _set(data, path, [])
    blob = _npz(arrays)
    digest = hashlib.sha256(blob).hexdigest()
    name = f"{stem}.{digest[:12]}.samples.npz"
    data[KEY] = {"file": name, "format": FORMAT, "sha256": digest, "entries": entries}
    return data, blob, name


def _npz(arrays: dict[str, np.ndarray]) -> bytes:
    """The ``.npz`` bytes of ``arrays``: what ``numpy.savez_compressed`` writes (one
    deflated ``<key>.npy`` member each), but at deflate level :data:`COMPRESS_LEVEL`."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=COMPRESS_LEVEL) as archive:
        for key, arr in arrays.items():
            with archive.open(f"{key}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(arr), allow_pickle=False)
    return buffer.getvalue()


def referenced(data: Any) -> str | None:
    """The sidecar file name a loaded YAML record names, or None."""
    ref = data.get(KEY) if isinstance(data, dict) else None
    return ref.get("file") if isinstance(ref, dict) and isinstance(ref.get("file"), str) else None


def join(data: dict, yaml_path: Path, load: bool = True) -> dict:
    """Put a loaded record's sidecar samples back (``load``) or leave them empty; the
    ``samples_sidecar`` key is removed either way.

    Raises:
        StoreError: the mapping is malformed, or the sidecar is missing, altered or unreadable
            (one line naming the file).
    """
    ref = data.pop(KEY, None)
    if ref is None or not load:
        return data
    if not isinstance(ref, dict) or ref.get("format") != FORMAT or not isinstance(ref.get("entries"), list):
        raise StoreError(f"{yaml_path}: corrupt store file: {KEY} is not a {FORMAT} mapping")
    name = ref.get("file")
    if not isinstance(name, str) or "/" in name or name.startswith("."):
        raise StoreError(f"{yaml_path}: corrupt store file: {KEY}.file is not a file name")
    path = yaml_path.parent / name
    try:
        blob = path.read_bytes()
    except FileNotFoundError:
        raise StoreError(f"{path}: sample sidecar of {yaml_path.name} is missing; restore it, or remove the record") from None
    except OSError as exc:
        raise StoreError(f"{path}: cannot read sample sidecar: {exc.strerror or exc}") from None
    if hashlib.sha256(blob).hexdigest() != ref.get("sha256"):
        raise StoreError(f"{path}: sample sidecar does not match the sha256 in {yaml_path.name}; restore it, or remove the record")
    try:
        _check_arrays(blob, ref["entries"])
        with np.load(io.BytesIO(blob), allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
        for entry in ref["entries"]:
            prefix = f"{entry['key']}_"
            samples = decode({k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)})
            if len(samples) != entry.get("count"):
                raise ValueError(f"{entry['key']} has {len(samples)} samples, the YAML says {entry.get('count')}")
            _set(data, _parse_path(entry["path"]), samples)
    except (ValueError, KeyError, TypeError, IndexError, OSError, zipfile.BadZipFile) as exc:
        raise StoreError(f"{path}: corrupt sample sidecar: {exc}") from None
    return data


def _check_arrays(blob: bytes, entries: list) -> None:
    """Refuse, before any array is allocated, a sidecar whose arrays are larger than the
    YAML's ``count`` allows: every array holds at most ``count`` elements (``grid`` two) of
    at most 8 bytes. The ``.npy`` headers are read with NumPy's own header reader.

    Raises:
        ValueError: an array larger than its entry allows, or not a plain ``.npy`` member.
    """
    limits = {}
    for entry in entries:
        count = entry.get("count") if isinstance(entry, dict) else None
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ValueError("an entry's count is not a whole number")
        limits[f"{entry.get('key')}_"] = max(count, 2)
    with zipfile.ZipFile(io.BytesIO(blob)) as archive:
        for info in archive.infolist():
            prefix = next((p for p in limits if info.filename.startswith(p)), None)
            if prefix is None or not info.filename.endswith(".npy"):
                raise ValueError(f"unexpected member {info.filename!r}")
            if info.file_size > limits[prefix] * 8 + 4096:
                raise ValueError(f"{info.filename} holds {info.file_size:,} bytes, more than {limits[prefix]:,} samples need")
            with archive.open(info) as member:
                version = np.lib.format.read_magic(member)
                shape, _, dtype = (np.lib.format.read_array_header_1_0(member) if version == (1, 0)
                                   else np.lib.format.read_array_header_2_0(member))
            if dtype.itemsize > 8 or dtype.hasobject or math.prod(shape) > limits[prefix]:
                raise ValueError(f"{info.filename} declares {math.prod(shape):,} elements of {dtype}, more than its {limits[prefix]:,}")


def write(directory: Path, name: str | None, blob: bytes | None) -> None:
    """Write a sidecar atomically (no-op without one)."""
    if name is not None and blob is not None:
        atomic_write_bytes(directory / name, blob)
