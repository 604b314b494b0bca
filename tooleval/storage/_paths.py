"""Writing only inside ``--out``: folders are created component by component, and a symbolic link or a file
where a folder of the results layout should be is refused with a clear error (exit 2), never followed.

``--out`` itself may be a link (the user chose it); everything *inside* it is checked. Under ``<out>/.tooleval``
(stage files, Prefect's home, leases, the generation store) no symbolic link is accepted at any depth
(:func:`check_state_folder`): a link there would send stage files, Prefect's database or a lease outside
``--out`` (or let ``tooleval gc`` delete files elsewhere).
"""

from __future__ import annotations

import errno
import os
import stat
import secrets
from pathlib import Path

from tooleval.errors import InputFileError

__all__ = ["OutFolderError", "encode_name", "ensure_dir", "safe_target", "check_out_folder", "check_state_folder",
           "LAYOUT_DIRS", "STATE_DIR", "write_bytes"]

LAYOUT_DIRS = ("traces", "rows", "legacy", "runs", "revisions", ".tooleval")
"""Folders ``tooleval`` writes directly under ``--out``."""

STATE_DIR = ".tooleval"
"""The folder of a results folder's working state: ``stages/``, ``prefect/``, ``locks/``, ``generations/``."""

DOCS = "docs/storage.md ('Results layout')"


class OutFolderError(InputFileError):
    """The results folder cannot be written safely (a file, a link, read-only, another filesystem)."""


def _refuse(path: Path, problem: str, fix: str) -> OutFolderError:
    return OutFolderError(path, None, problem, fix)


def _check_component(path: Path) -> bool:
    """True when ``path`` is an existing real folder, False when absent; refuses links and files."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    except NotADirectoryError:
        raise _refuse(path, "a file stands where a folder of the results should be.",
                      f"move that file away, or choose another --out (see {DOCS}).")
    if stat.S_ISLNK(info.st_mode):
        raise _refuse(path, "is a symbolic link inside the results folder; tooleval never writes through links, "
                      "so nothing lands outside --out.", "replace the link by a real folder, or point --out at "
                      "the link's target itself.")
    if not stat.S_ISDIR(info.st_mode):
        raise _refuse(path, "a file stands where a folder of the results should be.",
                      f"move that file away, or choose another --out (see {DOCS}).")
    return True


def _os_error(path: Path, exc: OSError) -> OutFolderError:
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return _refuse(path, f"cannot write here ({exc.strerror}).",
                       "choose a writable --out, or fix the folder's permissions.")
    if exc.errno == errno.ENOSPC:
        return _refuse(path, "no space left on the device.", "free some space or choose another --out.")
    if exc.errno == errno.EXDEV:
        return _refuse(path, "lies on another filesystem than the results folder.",
                       "keep every folder of --out on one filesystem (no mounts or links inside it).")
    return _refuse(path, f"cannot write here ({exc.strerror or exc}).", "check the path and its permissions.")


def ensure_dir(out: str | Path, relative: str | Path) -> Path:
    """Create ``out/relative`` (and its parents inside ``out``) as real folders; return it.

    Raises:
        OutFolderError: a component is a link or a file, or the folder cannot be created (read-only, ...).
    """
    out = Path(out)
    current = out
    if out.exists() and not out.is_dir():
        raise _refuse(out, "--out is a file, not a folder.", "choose a folder for --out (it is created if missing).")
    if not out.exists():
        try:
            out.mkdir(parents=True)
        except FileExistsError:
            pass
        except OSError as exc:
            raise _os_error(out, exc) from None
    for part in Path(relative).parts:
        if part in ("", ".", "..") or os.sep in part:
            raise ValueError(f"unsafe path component {part!r} in {relative!r}")
        current = current / part
        if not _check_component(current):
            try:
                current.mkdir()
            except FileExistsError:
                _check_component(current)
            except OSError as exc:
                raise _os_error(current, exc) from None
    return current


def safe_target(out: str | Path, relative: str | Path) -> Path:
    """``out/relative`` for a file about to be written whole (:func:`write_bytes`): its folders checked and
    created; the file itself not a folder (a link there is replaced, not followed).

    Raises:
        OutFolderError: see :func:`ensure_dir`; or the target is a folder.
    """
    relative = Path(relative)
    folder = ensure_dir(out, relative.parent) if relative.parent != Path(".") else ensure_dir(out, "")
    target = folder / relative.name
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        return target
    if stat.S_ISDIR(info.st_mode):
        raise _refuse(target, "is a folder where tooleval writes a file.", "move that folder away.")
    return target  # a link here is replaced by the new file (os.replace), never written through


def write_bytes(out: str | Path, relative: str | Path, data: bytes, *, mode: int = 0o666) -> Path:
    """Write ``out/relative`` whole: a temporary file in the same folder, then ``os.replace`` (a reader sees
    the old file or the new one). On object storage the equivalent is one PUT.

    Args:
        mode: Permission bits of a new file before the umask (``0o600`` for a secret).

    Raises:
        OutFolderError: see :func:`safe_target`; the write failed (read-only, no space).
    """
    target = safe_target(out, relative)
    tmp = _written_aside(target, data, mode)
    try:
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise _os_error(target, exc) from None
    return target


def _written_aside(target: Path, data: bytes, mode: int) -> Path:
    """A new file of a name of its own next to ``target`` holding ``data`` whole (``mode`` before the umask).

    Raises:
        OutFolderError: it cannot be written (nothing is left behind).
    """
    tmp = target.parent / f".{target.name}.{secrets.token_hex(6)}.tmp"
    try:
        handle = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), mode)
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise _os_error(target, exc) from None
    return tmp


def create_bytes(out: str | Path, relative: str | Path, data: bytes, *, mode: int = 0o666) -> bytes:
    """Create ``out/relative`` holding ``data`` unless it exists; return what the file holds.

    The file is written whole under a name of its own, then hard-linked into place: a link never replaces a file,
    so when several processes create it at once (two runs starting together on a new results folder) exactly one
    wins, and every one of them reads the winner's bytes. A local folder only.

    Raises:
        OutFolderError: see :func:`write_bytes`.
    """
    target = safe_target(out, relative)
    tmp = _written_aside(target, data, mode)
    try:
        try:
            os.link(tmp, target)
        except FileExistsError:
            pass
        return target.read_bytes()
    except OSError as exc:
        raise _os_error(target, exc) from None
    finally:
        tmp.unlink(missing_ok=True)


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_out_folder(out: str | Path) -> None:
    """Check, without writing anything, that ``out`` can hold results (a plan's first check).

    Raises:
        OutFolderError: ``out`` is a file; a folder of the layout is a link or a file; a link stands anywhere
            under ``.tooleval`` (:func:`check_state_folder`); ``out`` (or, when it does not exist yet, its nearest
            existing parent) is not writable.
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise _refuse(out, "--out is a file, not a folder.", "choose a folder for --out (it is created if missing).")
    if out.is_dir():
        for name in LAYOUT_DIRS:
            _check_component(out / name)
        runs = out / "runs"
        if runs.is_dir():
            for entry in runs.iterdir():
                if entry.is_symlink():
                    _check_component(entry)
        check_state_folder(out)
    probe = _nearest_existing(out.absolute())
    if not os.access(probe, os.W_OK | os.X_OK) or _read_only_mount(probe):
        raise _refuse(out, f"cannot write here ({probe} is read-only).",
                      "choose a writable --out, or fix the folder's permissions.")


def check_state_folder(out: str | Path) -> None:
    """Refuse a symbolic link anywhere under ``<out>/.tooleval`` (folders and files alike), without writing.

    Stage files, Prefect's database, server log and pid file, leases and stored generations are all written
    under it; a link at any of those paths (``.tooleval/stages``, ``.tooleval/prefect/prefect.db``) would write
    through it, outside ``--out``. Links that tooleval finds are never followed while looking.

    Raises:
        OutFolderError: a link (or a file where ``.tooleval`` should be a folder), naming its path; or a folder
            under it cannot be read.
    """
    root = Path(out) / STATE_DIR
    if not _check_component(root):
        return
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.is_symlink():
                        raise _refuse(Path(entry.path), "is a symbolic link inside the results folder's working "
                                      f"state ({STATE_DIR}); tooleval never writes through links, so nothing lands "
                                      "outside --out.", f"remove the link ({STATE_DIR} holds caches and run state "
                                      "that tooleval makes again), or point --out at a folder without links.")
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))
        except FileNotFoundError:
            continue  # removed while looking (a finished write's temporary folder)
        except OSError as exc:
            raise _os_error(folder, exc) from None


def _read_only_mount(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def encode_name(text: str, *, limit: int = 120) -> str:
    """A folder or file name standing for any string (a case id is data, never a path: docs/design.md
    "Trust rules"): every character but ``A-Z a-z 0-9 - _`` is percent-encoded (UTF-8), so ``/``, ``..``, an absolute
    path, spaces or NUL never make nested or escaping folders; a name longer than ``limit`` keeps its first
    characters and ends with ``~`` and 16 hex of the text's sha256 (names stay under filesystem limits and
    distinct). The exact id is always inside the files too.

    Examples: ``"a/b"`` -> ``"a%2Fb"``, ``".."`` -> ``"%2E%2E"``, ``""`` -> ``"~empty"``.
    """
    import hashlib
    from urllib.parse import quote

    if text == "":
        return "~empty"
    name = quote(text, safe="-_").replace(".", "%2E")
    if len(name) > limit:
        head = name[: limit - 17]
        cut = head.rfind("%", len(head) - 2)
        head = head if cut < 0 else head[:cut]  # never split a %XX sequence
        name = head + "~" + hashlib.sha256(text.encode()).hexdigest()[:16]
    return name
