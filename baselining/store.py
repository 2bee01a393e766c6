"""The baseline store: a directory of plain YAML files, one per record.

Layout (``STORE`` is ``spec.store_path()``)::

    STORE/current.yaml                                   which baseline is current, per class and signal
    STORE/baselines/<class>/<signal>/<baseline id>.yaml  every baseline ever taken (the history)
    STORE/initiatives/<initiative id>.yaml               the initiative ledger, verifications included
    STORE/looks/<class>/<signal>.jsonl                   the append-only look log: one JSON line per look at a change
    STORE/.looks.lock                                    held by a verify from its look numbers to their lines in the log
    STORE/initiatives.index.json                         class, status, start of every initiative (a cache)
    STORE/.lock                                          filelock guarding writers

Bulk samples (any ``samples`` list of 64 or more pairs) live in a compact sidecar next
to their YAML, ``<record>.<sha256[:12]>.samples.npz`` (:mod:`obsctl.baselining.sidecar`:
implicit time grid, deflate, written before the YAML that names it). The YAML stays
plain and small, so listings parse metadata only: the list methods
(:meth:`Store.current_baselines`, :meth:`Store.all_baselines`, :meth:`Store.history`,
:meth:`Store.initiatives`) return records *without* samples unless ``samples=True``;
the single-record methods load them. Shorter sample lists stay inline in the YAML.

``initiatives.index.json`` (JSON: a cache read on every lookup, parsed ~20x faster than
YAML) maps each initiative id to its class, status and start, and
the file's (mtime, size, inode) when indexed: ``--class`` lookups read it and parse only
the matching records; a record changed behind its back (another obsctl version, a hand
edit) is re-read because its stat differs, and every write under the lock refreshes it.

Every file is written atomically (:mod:`obsctl.atomicio`), and every
read-modify-write holds ``STORE/.lock`` (the filelock library: ``fcntl.flock`` on POSIX),
so concurrent ``obsctl`` processes never lose an update or see a half file. A file that
cannot be parsed or validated is reported as :class:`StoreError` naming it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

import yaml
from filelock import FileLock, Timeout
from pydantic import BaseModel, ValidationError

from obsctl.atomicio import atomic_write_bytes, atomic_write_yaml
from obsctl.baselining import sidecar
from obsctl.errors import ObsctlError, StoreError
from obsctl.names import is_record_id
from obsctl.records import SCHEMA_VERSION, Baseline, Initiative, Look

#: Largest store file read (a record's YAML; bulk samples live in sidecars). A month of
#: metadata is a few kB; this bounds what a damaged or planted file can make a reader hold.
MAX_RECORD_BYTES = 16 * 2**20


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """The store's YAML loader: PyYAML's safe loader (its C parser where available) that
    refuses aliases. obsctl never writes anchors, and an alias chain ("billion laughs")
    expands into a structure far larger than its file; the C parser resolves aliases to
    shared nodes, so a node constructed twice is an alias."""

    def construct_object(self, node, deep=False):  # noqa: ANN001 (PyYAML's signature)
        if node in self.constructed_objects or node in self.recursive_objects:
            raise yaml.constructor.ConstructorError(None, None, "YAML aliases are not allowed in store files", node.start_mark)
        return super().construct_object(node, deep)
#: Statuses of an initiative that still occupies its workload class.
ACTIVE_STATUSES = ("open", "verified")
LOCK_TIMEOUT_SECONDS = 30.0
#: How long a verify waits for another verify's looks to be logged (it holds the look log's lock for its whole run).
LOOKS_LOCK_TIMEOUT_SECONDS = 600.0

M = TypeVar("M", bound=BaseModel)


class Store:
    """The store at ``path`` (created on first write).

    Args:
        path: the store directory, usually ``spec.store_path()``.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock: FileLock | None = None

    # --- paths -----------------------------------------------------------------------

    @property
    def current_file(self) -> Path:
        """``STORE/current.yaml``."""
        return self.path / "current.yaml"

    def baseline_file(self, workload_class: str, signal: str, baseline_id: str) -> Path:
        """Path of one baseline record."""
        return self.path / "baselines" / _safe(workload_class, "workload class") / _safe(signal, "signal") / f"{_safe(baseline_id, 'baseline id')}.yaml"

    def initiative_file(self, initiative_id: str) -> Path:
        """Path of one initiative record."""
        return self.path / "initiatives" / f"{_safe(initiative_id, 'initiative id')}.yaml"

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the store's write lock (re-entrant within a process).

        Raises:
            StoreError: the store directory cannot be created, the lock file cannot be
                opened (read-only file system, ``.lock`` is a directory, no permission), or
                the lock could not be taken within 30 s. One line naming the path.
        """
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise StoreError(f"{self.path}: the store path is not a directory") from None
        except OSError as exc:
            raise StoreError(f"{self.path}: cannot create the store directory: {exc.strerror or exc}") from None
        lock_path = self.path / ".lock"
        if self._lock is None:
            # One FileLock per Store: it counts nested acquisitions, so it is re-entrant.
            self._lock = FileLock(str(lock_path), timeout=LOCK_TIMEOUT_SECONDS)
        try:
            self._lock.acquire()
        except Timeout:
            raise StoreError(f"{self.path}: store is locked by another obsctl process (waited {LOCK_TIMEOUT_SECONDS:.0f}s for {lock_path})") from None
        except OSError as exc:
            raise StoreError(f"{lock_path}: cannot take the store lock: {exc.strerror or exc}") from None
        try:
            yield
        finally:
            self._lock.release()

    # --- baselines -------------------------------------------------------------------

    def _directory(self, path: Path) -> bool:
        """True when ``path`` (the store or one of its directories) is a directory, False
        when it does not exist yet.

        Raises:
            StoreError: it exists but is not a directory (a file where the store expects one).
        """
        for part in (self.path, path):
            if part.exists() and not part.is_dir():
                raise StoreError(f"{part}: not a directory (the store expects a directory here)")
        return path.is_dir()

    def current_index(self) -> dict[str, dict[str, str]]:
        """``{class: {signal: baseline id}}`` from ``current.yaml`` (empty if absent).

        Raises:
            StoreError: ``current.yaml`` (or the store path) is unreadable or malformed.
        """
        data = _read_yaml(self.current_file, missing_ok=True)
        if data is None:
            return {}
        index = data.get("baselines") if isinstance(data, dict) else None
        if not isinstance(index, dict) or not all(isinstance(v, dict) for v in index.values()):
            raise StoreError(f"{self.current_file}: expected 'baselines: {{class: {{signal: baseline id}}}}'")
        return {str(c): {str(s): str(i) for s, i in sigs.items()} for c, sigs in index.items()}

    def current_baselines(self, samples: bool = False) -> list[Baseline]:
        """Every current baseline, sorted by (class, signal); ``[]`` for an empty store.

        Args:
            samples: load the sample sidecars too (default: records without samples).

        Raises:
            StoreError: ``current.yaml`` or a baseline file it points to is missing or unreadable.
        """
        out = []
        for workload_class, signals in sorted(self.current_index().items()):
            for signal, baseline_id in sorted(signals.items()):
                out.append(self._load_pointed(workload_class, signal, baseline_id, samples))
        return out

    def current_baseline(self, workload_class: str, signal: str, samples: bool = True,
                         index: dict[str, dict[str, str]] | None = None) -> Baseline | None:
        """The current baseline of one class and signal (with its samples by default), or None.

        ``index``: :meth:`current_index` as already read (many look-ups, one read)."""
        baseline_id = (self.current_index() if index is None else index).get(workload_class, {}).get(signal)
        return None if baseline_id is None else self._load_pointed(workload_class, signal, baseline_id, samples)

    def baseline(self, baseline_id: str, samples: bool = True) -> Baseline:
        """The baseline with this id (current or historical), with its samples by default.

        Raises:
            StoreError: no such baseline, or its file (or sample sidecar) is unreadable.
        """
        parts = baseline_id.split(".")
        if len(parts) >= 3:
            path = self.baseline_file(parts[0], parts[1], baseline_id)
            if path.exists():
                return _load_model(path, Baseline, samples)
        self._directory(self.path / "baselines")
        for path in sorted((self.path / "baselines").glob(f"*/*/{_safe(baseline_id, 'baseline id')}.yaml")):
            return _load_model(path, Baseline, samples)
        raise StoreError(f"{self.path}: no baseline {baseline_id!r} (see: obsctl baseline list)")

    def history(self, workload_class: str, signal: str, samples: bool = False) -> list[Baseline]:
        """All baselines of one class and signal, oldest first (current one included; without samples by default)."""
        directory = self.path / "baselines" / _safe(workload_class, "workload class") / _safe(signal, "signal")
        self._directory(self.path / "baselines")
        self._directory(directory)
        records = [_load_model(p, Baseline, samples) for p in sorted(directory.glob("*.yaml"))]
        return sorted(records, key=lambda b: (b.created_at, b.id))

    def all_baselines(self, samples: bool = False) -> list[Baseline]:
        """Every baseline in the store, sorted by (class, signal, created_at) (without samples by default)."""
        self._directory(self.path / "baselines")
        records = [_load_model(p, Baseline, samples) for p in sorted((self.path / "baselines").glob("*/*/*.yaml"))]
        return sorted(records, key=lambda b: (b.workload_class, b.signal, b.created_at, b.id))

    def save_baseline(self, baseline: Baseline, make_current: bool = True, columns: tuple | None = None) -> Baseline:
        """Write a baseline record and, by default, make it current for its class and signal.

        If the id is taken (two snapshots in the same second) ``-2``, ``-3``... is
        appended. The previous current baseline stays in the history.

        ``current.yaml`` is read and validated *before* the record is written, and the
        record is removed again if the new ``current.yaml`` cannot be written, so a
        failure leaves no orphan record in the history.

        ``columns``: ``baseline.samples`` as two float64 arrays ``(times, values)`` (the
        same floats), so the sidecar is encoded without converting the tuples again.

        Returns:
            The baseline as stored (its id possibly suffixed).

        Raises:
            StoreError: the lock, ``current.yaml`` or a write failed (nothing stored).
        """
        with self.locked():
            index = self.current_index() if make_current else None
            stored = baseline
            n = 1
            while self.baseline_file(stored.workload_class, stored.signal, stored.id).exists():
                n += 1
                stored = baseline.model_copy(update={"id": f"{baseline.id}-{n}"})
            record = self.baseline_file(stored.workload_class, stored.signal, stored.id)
            data, raw = sidecar.dump(stored)
            if columns is not None:
                raw = [(path, sidecar.Columns(samples, *columns)) if path == ("samples",) else (path, samples) for path, samples in raw]
            side = _write_record(record, data, raw)
            if index is not None:
                index.setdefault(stored.workload_class, {})[stored.signal] = stored.id
                try:
                    atomic_write_yaml(self.current_file, {"baselines": index})
                except BaseException:
                    record.unlink(missing_ok=True)
                    if side is not None:
                        side.unlink(missing_ok=True)
                    raise
        return stored

    def _load_pointed(self, workload_class: str, signal: str, baseline_id: str, samples: bool = True) -> Baseline:
        path = self.baseline_file(workload_class, signal, baseline_id)
        if not path.exists():
            raise StoreError(f"{self.current_file}: current baseline of {workload_class}/{signal} is {baseline_id!r}, but {path} does not exist")
        return _load_model(path, Baseline, samples)

    # --- initiatives -----------------------------------------------------------------

    @property
    def initiative_index_file(self) -> Path:
        """``STORE/initiatives.index.json`` (see module doc)."""
        return self.path / "initiatives.index.json"

    def initiative_index(self) -> dict[str, dict]:
        """``{id: {workload_class, status, started_at, stat}}`` of every initiative record.

        Read from ``initiatives.index.json``; records missing from it or whose file stat
        changed are parsed (without samples), records gone are dropped. Nothing is written.

        Raises:
            StoreError: as :meth:`initiatives`.
        """
        directory = self.path / "initiatives"
        if not self._directory(directory):
            return {}
        try:
            data = json.loads(self.initiative_index_file.read_bytes())
        except (OSError, ValueError, RecursionError):
            data = None  # missing or unreadable: a cache, rebuilt from the records
        known = data.get("initiatives") if isinstance(data, dict) and data.get("version") == 1 else None
        known = known if isinstance(known, dict) else {}
        out: dict[str, dict] = {}
        for path in directory.glob("*.yaml"):
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            stat = [st.st_mtime_ns, st.st_size, st.st_ino]
            entry = known.get(path.stem)
            if not (isinstance(entry, dict) and entry.get("stat") == stat and {"workload_class", "status", "started_at"} <= entry.keys()):
                record = _load_model(path, Initiative, samples=False)
                entry = {"workload_class": record.workload_class, "status": record.status,
                         "started_at": record.started_at.isoformat(), "stat": stat}
            out[path.stem] = entry
        return out

    def _refresh_initiative_index(self) -> None:
        # Under the lock: write what initiative_index() found (a cache; failures are not fatal to the record).
        index = self.initiative_index()
        with contextlib.suppress(OSError, ObsctlError):  # a stale cache is re-checked on read
            text = json.dumps({"version": 1, "initiatives": dict(sorted(index.items()))}, indent=1)
            atomic_write_bytes(self.initiative_index_file, text.encode("utf-8"))

    def initiatives(self, workload_class: str | None = None, status: str | None = None, samples: bool = False) -> list[Initiative]:
        """Initiatives, oldest first, optionally only one class and/or status.

        Only the matching records are parsed (:meth:`initiative_index`), without their
        samples unless ``samples``.

        Raises:
            StoreError: the store or ``initiatives`` is not a directory, or a record is unreadable.
        """
        index = self.initiative_index()
        wanted = [iid for iid, e in index.items()
                  if (workload_class is None or e["workload_class"] == workload_class) and (status is None or e["status"] == status)]
        records = [_load_model(self.initiative_file(iid), Initiative, samples) for iid in sorted(wanted)]
        records = [i for i in records if (workload_class is None or i.workload_class == workload_class) and (status is None or i.status == status)]
        return sorted(records, key=lambda i: (i.started_at, i.id))

    def initiative(self, initiative_id: str) -> Initiative:
        """The initiative with this id.

        Raises:
            StoreError: no such initiative, or its file is unreadable.
        """
        path = self.initiative_file(initiative_id)
        self._directory(path.parent)
        if not path.exists():
            raise StoreError(f"{self.path}: no initiative {initiative_id!r} (see: obsctl initiative list)")
        return _load_model(path, Initiative)

    def open_initiative(self, workload_class: str) -> Initiative | None:
        """The class's active initiative (status ``open`` or ``verified``), or None.

        Chosen from the index (class, status, start), so only that one record is parsed,
        however many initiatives the class has had."""
        index = self.initiative_index()
        active = sorted((e["started_at"], iid) for iid, e in index.items()
                        if e["workload_class"] == workload_class and e["status"] in ACTIVE_STATUSES)
        for _, iid in reversed(active):
            record = self.initiative(iid)
            if record.workload_class == workload_class and record.status in ACTIVE_STATUSES:  # the index is a cache
                return record
        return None

    def add_initiative(self, initiative: Initiative) -> Initiative:
        """Record a new initiative, refusing a second active one on the same class.

        The check and the write happen under the store lock, so two concurrent starts
        cannot both succeed. A taken id gets ``-2``, ``-3``... appended.

        Raises:
            StoreError: the class already has an active initiative.
        """
        with self.locked():
            active = self.open_initiative(initiative.workload_class)
            if active is not None:
                raise StoreError(
                    f"workload class {initiative.workload_class!r} already has an open initiative {active.id!r} "
                    f"({active.status}); verify and promote or close it first (obsctl initiative close --initiative {active.id}): "
                    "parallel initiatives on one class cannot be evaluated"
                )
            stored, n = initiative, 1
            while self.initiative_file(stored.id).exists():
                n += 1
                stored = initiative.model_copy(update={"id": f"{initiative.id}-{n}"})
            _write_record(self.initiative_file(stored.id), *sidecar.dump(stored))
            self._refresh_initiative_index()
        return stored

    def save_initiative(self, initiative: Initiative) -> None:
        """Create or replace an initiative record (atomic, under the store lock).

        Sample lists left empty in ``initiative`` that the stored record has (a record
        loaded without samples) keep their stored samples: verifications are append-only.
        """
        with self.locked():
            path = self.initiative_file(initiative.id)
            data, raw = sidecar.dump(initiative)
            old_side = None
            if path.exists():
                old = _read_yaml(path)
                old_side = sidecar.referenced(old)
                if old_side is not None and isinstance(old, dict):
                    old = sidecar.join(old, path)
                    for where in sidecar.sample_paths(data):
                        if any(where == p for p, _ in raw):
                            continue  # the model's own samples
                        try:
                            kept = sidecar._get(old, where)
                        except (KeyError, IndexError, TypeError):
                            continue
                        if not sidecar._get(data, where) and kept:
                            sidecar._set(data, where, kept)
            side = _write_record(path, data, raw)
            if old_side is not None and (side is None or side.name != old_side):
                (path.parent / old_side).unlink(missing_ok=True)
            self._refresh_initiative_index()


    # --- the look log --------------------------------------------------------------------

    def looks_file(self, workload_class: str, signal: str) -> Path:
        """``STORE/looks/<class>/<signal>.jsonl``."""
        return self.path / "looks" / _safe(workload_class, "workload class") / f"{_safe(signal, 'signal')}.jsonl"

    def _check_looks_path(self, path: Path) -> None:
        # Every component under the store (looks/, looks/<class>/, the file) must be the
        # store's own: a linked folder or file could point at another log, or at none
        # (a fresh sequence: a fresh error budget).
        for part in (self.path / "looks", path.parent, path):
            if part.is_symlink():
                raise StoreError(f"{part}: is a symbolic link on the look log's path; it must be the store's own "
                                 f"{'file' if part == path else 'folder'} (restore it from history)")

    def all_looks(self) -> list[Look]:
        """Every look in the store's logs (``STORE/looks/<class>/<signal>.jsonl``), each log
        oldest first. Raises StoreError as :meth:`looks` (a linked folder or file too)."""
        root = self.path / "looks"
        if root.is_symlink() or not root.is_dir():
            self._check_looks_path(root / "_" / "_.jsonl")
            return []
        out: list[Look] = []
        for folder in sorted(root.iterdir()):
            if folder.is_symlink():
                self._check_looks_path(folder / "_.jsonl")
            if folder.is_dir():
                for name in sorted(log.stem for log in folder.glob("*.jsonl")):
                    out += self.looks(folder.name, name)
        return out

    @contextlib.contextmanager
    def looks_locked(self) -> Iterator[None]:
        """Hold the look log's lock (``STORE/.looks.lock``) from a verify's look numbers to
        their lines in the log, so concurrent verifies get distinct numbers (the later one
        waits up to :data:`LOOKS_LOCK_TIMEOUT_SECONDS` for the earlier one's looks).

        Raises:
            StoreError: the lock cannot be taken (timeout, unwritable store), naming the path.
        """
        lock_path = self.path / ".looks.lock"
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            lock = FileLock(str(lock_path), timeout=LOOKS_LOCK_TIMEOUT_SECONDS)
            lock.acquire()
        except Timeout:
            raise StoreError(f"{self.path}: another verify holds the look log (waited {LOOKS_LOCK_TIMEOUT_SECONDS:.0f}s for {lock_path})") from None
        except OSError as exc:
            raise StoreError(f"{lock_path}: cannot take the look log's lock: {exc.strerror or exc}") from None
        try:
            yield
        finally:
            lock.release()

    def looks(self, workload_class: str, signal: str) -> list[Look]:
        """Every look logged at ``workload_class``/``signal``, oldest first (``[]``: none yet).

        Raises:
            StoreError: the log is unreadable, or a line is not a look (naming file and line).
        """
        path = self.looks_file(workload_class, signal)
        self._check_looks_path(path)  # a dangling link would read as "no looks yet": a fresh sequence
        self._directory(path.parent)
        if not path.exists():
            return []
        try:
            text = path.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise StoreError(f"{path}: cannot read the look log: {getattr(exc, 'strerror', None) or exc}") from None
        out = []
        for number, line in enumerate(text.splitlines(), 1):
            try:
                data = json.loads(line)
                version = data.get("schema_version") if isinstance(data, dict) else None
                if version != SCHEMA_VERSION:
                    raise StoreError(f"{path}:{number}: a look of schema version {version!r}; this obsctl reads version {SCHEMA_VERSION}")
                look = Look.model_validate(data)
                if (look.workload_class, look.signal) != (workload_class, signal):
                    raise StoreError(f"{path}:{number}: a look at {look.workload_class}/{look.signal} in the log of {workload_class}/{signal}; "
                                     "restore the file from history")
                out.append(look)
            except (ValueError, ValidationError) as exc:
                raise StoreError(f"{path}:{number}: corrupt look log line ({_first_error(exc)}); restore the file from history") from None
        return out

    def append_looks(self, looks: list[Look]) -> None:
        """Append ``looks`` to their logs, all or none of each file (under the store lock).

        Each log is rewritten atomically with its old lines first, so a failed write
        leaves it as it was and no half line is ever stored.

        Raises:
            StoreError: the store is locked, read-only or full (naming the path).
        """
        with self.locked():
            for key in dict.fromkeys((look.workload_class, look.signal) for look in looks):
                path = self.looks_file(*key)
                self._check_looks_path(path)
                new = "".join(look.model_dump_json() + "\n" for look in looks if (look.workload_class, look.signal) == key)
                try:
                    old = path.read_bytes() if path.exists() else b""
                    if old and not old.endswith(b"\n"):
                        raise StoreError(f"{path}: the look log's last line is incomplete; restore the file from history")
                    path.parent.mkdir(parents=True, exist_ok=True)
                    atomic_write_bytes(path, old + new.encode("utf-8"))
                except OSError as exc:
                    raise StoreError(f"{path}: cannot write the look log: {exc.strerror or exc}") from None


def _first_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        return f"{'.'.join(str(p) for p in first['loc']) or '(top level)'}: {first['msg']}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _safe(part: str, what: str) -> str:
    # Ids and names become path components: refuse anything that could leave the store.
    if not is_record_id(part):
        raise StoreError(f"{what} {part!r} is not a valid store name (letters, digits, '.', '_', '-')")
    return part


def _write_record(path: Path, data: dict, raw: list = ()) -> Path | None:
    """Write a record's sidecar (if its samples need one), then its YAML; returns the sidecar path.

    The YAML is written last, so a failure leaves the old YAML (and its old sidecar)
    intact; the new sidecar is removed again when the YAML cannot be written."""
    data, blob, name = sidecar.split(data, path.stem, raw)
    sidecar.write(path.parent, name, blob)
    side = path.parent / name if name else None
    try:
        atomic_write_yaml(path, data)
    except BaseException:
        if side is not None:
            side.unlink(missing_ok=True)
        raise
    return side


def _read_yaml(path: Path, missing_ok: bool = False) -> object:
    try:
        if path.stat().st_size > MAX_RECORD_BYTES:
            raise StoreError(f"{path}: store file larger than {MAX_RECORD_BYTES // 2**20} MiB: not a record obsctl wrote; restore it from history or remove it")
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        if missing_ok:
            return None
        raise StoreError(f"{path}: file not found") from None
    except UnicodeDecodeError as exc:
        raise StoreError(f"{path}: store file is not valid UTF-8 (offset {exc.start}); restore it from history or remove it") from None
    except OSError as exc:
        raise StoreError(f"{path}: cannot read store file: {exc.strerror}") from None
    try:
        return yaml.load(text, Loader=_Loader)
    except RecursionError:
        raise StoreError(f"{path}: corrupt store file (YAML nested too deeply); restore it from history or remove it") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise StoreError(f"{where}: corrupt store file (YAML error: {problem}); restore it from history or remove it") from None


def _load_model(path: Path, model: type[M], samples: bool = True) -> M:
    data = _read_yaml(path)
    if not isinstance(data, dict):
        raise StoreError(f"{path}: corrupt store file: expected a {model.__name__} mapping, got {type(data).__name__}")
    version = data.get("schema_version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        what = "re-snapshot the baseline" if model is Baseline else "start the initiative again"
        raise StoreError(f"{path}: a {model.__name__} record of schema version {version!r}; this obsctl reads version "
                         f"{SCHEMA_VERSION}: {what}")
    data = sidecar.join(data, path, load=samples)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise StoreError(f"{path}: corrupt store file: {model.__name__}.{field}: {first['msg']}") from None
