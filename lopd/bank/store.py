"""Crash-safe bank directories: versioned snapshots behind an atomically swapped pointer.

Layout of a bank directory ``DIR``::

    DIR/CURRENT              "v000003 <sha256 of v000003/manifest.json>"
    DIR/v000003/manifest.json    format, config, counts and the SHA-256 + size of every file
    DIR/v000003/experiences.jsonl
    DIR/v000003/vectors.npy
    DIR/v000003/shards/<n>.faiss  (approximate indexes only; flat ones are rebuilt from vectors)

A save writes a whole new snapshot into ``DIR/.tmp-*``, fsyncs it, renames it to the next version,
then replaces ``CURRENT`` with ``os.replace`` (atomic on POSIX). A crash at any point leaves
``CURRENT`` naming the previous complete snapshot; stale snapshots and temp dirs are removed by the
next successful save. Loading checks the manifest hash in ``CURRENT`` and each file's hash, so a
corrupt or truncated bank fails with :class:`BankCorruptError` instead of returning wrong results.
One writer at a time per bank directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

FORMAT = "lopd-experience-bank"
FORMAT_VERSION = 1
CURRENT = "CURRENT"
MANIFEST = "manifest.json"
_VERSION_RE = re.compile(r"^v(\d{6,})$")


class BankCorruptError(ValueError):
    """A bank directory that is missing files, fails a checksum, or does not parse."""


class _HashingWriter:
    """A write-only file wrapper that hashes and counts what passes through."""

    def __init__(self, f: IO[bytes]):
        self.f, self.sha, self.size = f, hashlib.sha256(), 0

    def write(self, data: Any) -> int:
        b = bytes(data) if not isinstance(data, bytes) else data
        self.sha.update(b)
        self.size += len(b)
        return self.f.write(b)

    def flush(self) -> None:
        self.f.flush()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


Writer = Callable[[Any], None]
"""Writes one file's content to a binary file-like object (only ``write`` is available)."""


def _versions(root: Path) -> list[int]:
    out = []
    for p in root.iterdir() if root.is_dir() else []:
        m = _VERSION_RE.match(p.name)
        if m and p.is_dir():
            out.append(int(m.group(1)))
    return sorted(out)


def is_bank(root: str | os.PathLike) -> bool:
    return (Path(root) / CURRENT).is_file()


def write_snapshot(root: str | os.PathLike, files: dict[str, Writer], manifest: dict[str, Any]) -> str:
    """Write ``files`` (relative path -> writer) and ``manifest`` as a new snapshot of ``root`` and
    make it current. Returns the version name. The previous snapshot stays valid until the swap."""
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise NotADirectoryError(f"{root} exists and is not a directory")
    if root.is_dir() and any(root.iterdir()) and not is_bank(root):
        raise FileExistsError(f"{root} is a non-empty directory that is not a bank; refusing to write there")
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".tmp-{uuid.uuid4().hex[:12]}"
    tmp.mkdir()
    entries: dict[str, dict[str, Any]] = {}
    for rel, write in files.items():
        path = tmp / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            hw = _HashingWriter(f)
            write(hw)
            f.flush()
            os.fsync(f.fileno())
        entries[rel] = {"sha256": hw.sha.hexdigest(), "bytes": hw.size}
    manifest = {"format": FORMAT, "format_version": FORMAT_VERSION, **manifest, "files": entries}
    manifest_bytes = json.dumps(manifest, indent=1, ensure_ascii=False).encode("utf-8")
    with open(tmp / MANIFEST, "wb") as f:
        f.write(manifest_bytes)
        f.flush()
        os.fsync(f.fileno())
    subdirs = {tmp / parent for rel in files for parent in Path(rel).parents if parent != Path(".")}
    for sub in sorted(subdirs, key=lambda d: -len(d.parts)):
        _fsync(sub)  # new entries in subfolders (shards/) are durable only once their folder is synced
    _fsync(tmp)
    versions = _versions(root)
    name = f"v{(versions[-1] + 1) if versions else 1:06d}"
    os.rename(tmp, root / name)
    pointer = root / f"{CURRENT}.tmp-{uuid.uuid4().hex[:12]}"
    with open(pointer, "w", encoding="ascii") as f:
        f.write(f"{name} {hashlib.sha256(manifest_bytes).hexdigest()}\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(pointer, root / CURRENT)  # the commit point
    _fsync(root)
    _cleanup(root, keep=name)
    return name


def _cleanup(root: Path, keep: str) -> None:
    for p in root.iterdir():
        stale = (_VERSION_RE.match(p.name) and p.name != keep) or p.name.startswith(".tmp-") \
            or p.name.startswith(f"{CURRENT}.tmp-")
        if stale:
            try:
                shutil.rmtree(p) if p.is_dir() else p.unlink()
            except OSError:
                pass  # best effort: a leftover never affects loading


def read_snapshot(root: str | os.PathLike, verify: bool = True) -> tuple[Path, dict[str, Any]]:
    """(snapshot directory, manifest) of the current snapshot, checked against its hashes."""
    root = Path(root)
    if not root.exists():
        raise FileNotFoundError(f"no bank at {root}")
    pointer = root / CURRENT
    if not pointer.is_file():
        raise BankCorruptError(f"{root} is not an experience bank (no {CURRENT} file)")
    try:
        name, digest = pointer.read_text(encoding="ascii").split()
    except (ValueError, UnicodeDecodeError):
        raise BankCorruptError(f"{pointer} is unreadable; the bank is corrupt") from None
    snap = root / name
    if not _VERSION_RE.match(name) or not (snap / MANIFEST).is_file():
        raise BankCorruptError(f"{pointer} names snapshot {name!r}, which is missing; the bank is corrupt")
    raw = (snap / MANIFEST).read_bytes()
    if hashlib.sha256(raw).hexdigest() != digest:
        raise BankCorruptError(f"{snap / MANIFEST} does not match the checksum in {pointer}; the bank is corrupt")
    try:
        manifest = json.loads(raw)
    except ValueError as e:
        raise BankCorruptError(f"{snap / MANIFEST} is not valid JSON ({e}); the bank is corrupt") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BankCorruptError(f"{snap / MANIFEST} is not an experience-bank manifest")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise BankCorruptError(f"bank format version {manifest.get('format_version')!r} is not supported "
                               f"(this code reads {FORMAT_VERSION})")
    files = manifest.get("files")
    if not isinstance(files, dict):
        raise BankCorruptError(f"{snap / MANIFEST} lists no files")
    for rel, meta in files.items():
        path = snap / rel
        if not path.is_file():
            raise BankCorruptError(f"bank file {path} is missing; the bank is corrupt")
        if path.stat().st_size != meta.get("bytes"):
            raise BankCorruptError(f"bank file {path} has {path.stat().st_size} bytes, the manifest says "
                                   f"{meta.get('bytes')}; the bank is corrupt (rebuild with `lopd bank build`)")
        if verify and sha256_file(path) != meta.get("sha256"):
            raise BankCorruptError(f"bank file {path} fails its SHA-256 checksum; the bank is corrupt "
                                   "(rebuild with `lopd bank build`)")
    return snap, manifest


def disk_bytes(root: str | os.PathLike) -> int:
    """Bytes of the current snapshot (manifest and pointer included)."""
    snap, manifest = read_snapshot(root, verify=False)
    return sum(m["bytes"] for m in manifest["files"].values()) + (snap / MANIFEST).stat().st_size \
        + (Path(root) / CURRENT).stat().st_size
