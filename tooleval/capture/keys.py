"""The redaction key's lifecycle: found, created, or refused.

Where the key comes from, in order:

1. ``$TOOLEVAL_REDACTION_KEY`` (its text): what workers of a distributed run and CI secrets use;
2. ``$TOOLEVAL_REDACTION_KEY_FILE``: a key file each machine can read (its bytes, surrounding whitespace
   stripped, so ``openssl rand -hex 32 > key`` works); the key itself never travels with a flow or task, since Prefect
   records a flow's and a task's parameters on its server and in its result store;
3. ``<out>/redaction.key``, created once per results folder (mode 0600) — never on object storage: with
   ``--out s3://…`` the key must come from the environment (1 or 2), so it never lands next to the results.

A run is redacted with one key, and only that key can rescore it, gate it or check its drift (the key's sha256
is in ``summary.json``). So a *new* key — no key file yet, or an environment key — is refused where runs made
with another key already exist, unless the user asks for it (``tooleval run --new-redaction-key``): silently
starting a new key would make every earlier run unreadable. Planning never writes: the key file is created
only after the whole plan passed (:func:`persist_key`), so an exit 2 leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from tooleval.errors import InputFileError

__all__ = ["KEY_ENV", "KEY_FILE_ENV", "MAX_KEY_BYTES", "MIN_KEY_BYTES", "PlannedKey", "environment_key",
           "plan_key", "persist_key", "read_key_file", "recorded_key_digests"]

KEY_ENV = "TOOLEVAL_REDACTION_KEY"
KEY_FILE_ENV = "TOOLEVAL_REDACTION_KEY_FILE"
MIN_KEY_BYTES = 16
"""Shortest key file accepted, in bytes: a key a person could guess or search for (an empty file makes every token
an HMAC under the empty key, which anyone can recompute for a guessable value such as an e-mail address) is
refused, not used. The key tooleval creates has 64 (32 random bytes as hex)."""
MAX_KEY_BYTES = 4096
"""Longest key file accepted, in bytes; only this much is ever read (a key file that is a device such as
``/dev/zero`` would otherwise be read without end)."""

logger = logging.getLogger(__name__)
_WARNED: set[str] = set()


def read_key_file(path: Path, *, named_by: str, strip: bool) -> bytes:
    """The key a key file holds: at most :data:`MAX_KEY_BYTES` bytes are read, surrounding whitespace stripped when
    ``strip``. A file that others than its owner may read is used, with a warning (logged once per file).

    Args:
        path: The key file.
        named_by: How the user knows the file, for messages (``"$TOOLEVAL_REDACTION_KEY_FILE"``, ``"the results
            folder"``).
        strip: Strip surrounding whitespace (``openssl rand -hex 32 > FILE`` ends with a newline).

    Raises:
        InputFileError: the file is unreadable, empty (or only whitespace), shorter than :data:`MIN_KEY_BYTES` or
            longer than :data:`MAX_KEY_BYTES` (naming the file and the fix; exit 2).
    """
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_KEY_BYTES + 1)
            mode = os.fstat(handle.fileno()).st_mode
    except OSError as exc:
        raise InputFileError(path, None, f"cannot read the redaction key file of {named_by} "
                             f"({exc.strerror or exc}).", "fix the path or its permissions on this machine.") from None
    fix = ("write a new key into it (e.g. openssl rand -hex 32 > FILE, then chmod 600 FILE); runs redacted with "
           "another key need that key back")
    if len(data) > MAX_KEY_BYTES:
        raise InputFileError(path, None, f"the redaction key file of {named_by} is longer than {MAX_KEY_BYTES} "
                             "bytes (is it a key file at all?).", fix + ".")
    key = data.strip() if strip else data
    if not key.strip():
        raise InputFileError(path, None, f"the redaction key file of {named_by} is empty: tokens under an empty "
                             "key can be recomputed by anyone.", fix + ".")
    if len(key.strip()) < MIN_KEY_BYTES:
        raise InputFileError(path, None, f"the redaction key file of {named_by} holds only {len(key.strip())} "
                             "byte(s); "
                             f"a key needs at least {MIN_KEY_BYTES} (a short key can be guessed).", fix + ".")
    if stat.S_ISREG(mode) and mode & 0o077 and str(path) not in _WARNED:
        _WARNED.add(str(path))
        logger.warning("the redaction key file %s may be read by others than its owner (mode %s): anyone who "
                       "can read it can recompute every redacted value; chmod 600 it.", path,
                       oct(stat.S_IMODE(mode)))
    return key


def environment_key() -> bytes | None:
    """The key this process's environment names: ``$TOOLEVAL_REDACTION_KEY``'s text, else the bytes of the file
    ``$TOOLEVAL_REDACTION_KEY_FILE`` names (surrounding whitespace stripped), else ``None``.

    Raises:
        InputFileError: the key file is unreadable, empty, too short or too long (:func:`read_key_file`).
    """
    text = os.environ.get(KEY_ENV)
    if text:
        return text.encode()
    name = os.environ.get(KEY_FILE_ENV)
    if not name:
        return None
    return read_key_file(Path(name), named_by=f"${KEY_FILE_ENV}", strip=True)


@dataclass(frozen=True)
class PlannedKey:
    """The key a run will use: its bytes, where it comes from (``env`` | ``file`` | ``new``) and its digest."""

    key: bytes
    source: str

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.key).hexdigest()


def recorded_key_digests(out: Path | str) -> dict[str, str]:
    """Run id -> the key digest its ``summary.json`` records (redacted runs only); ``out`` a folder or a URL."""
    from tooleval.storage import read_document, tree_of

    found: dict[str, str] = {}
    for run in tree_of(out).folders("runs/*"):
        run_id = run.rsplit("/", 1)[-1]
        try:
            summary = json.loads(read_document(out, f"runs/{run_id}/summary.json") or b"null")
        except (OSError, ValueError, InputFileError):
            continue
        digest = ((summary.get("redaction") or {}) if isinstance(summary, dict) else {}).get("key_digest")
        if isinstance(digest, str) and digest:
            found[run_id] = digest
    return found


def plan_key(out: str | Path, *, new_key: bool = False) -> PlannedKey:
    """Decide the run's redaction key without writing anything.

    Args:
        out: The results folder.
        new_key: The user asked to start a new key although runs with another key exist.

    Raises:
        InputFileError: the key would be new (no key file, or an environment key) while runs redacted with
            another key exist under ``out``, and ``new_key`` is false; or a key file is unreadable, empty, too
            short or too long (:func:`read_key_file`).
    """
    from tooleval.storage import is_remote

    env = environment_key()
    if is_remote(str(out)):
        if not env:
            raise InputFileError(None, None, f"--out {out} is object storage: the redaction key is never stored "
                                 "next to the results there.", f"set {KEY_ENV} (or {KEY_FILE_ENV}=PATH) here and "
                                 "on every worker, or pass --no-redaction.")
        path: Path | str = f"{out}/redaction.key"
        planned = PlannedKey(env, "env")
    elif env:
        out = Path(out).absolute()
        path = out / "redaction.key"
        planned = PlannedKey(env, "env")
    elif (path := Path(out).absolute() / "redaction.key").exists():
        return PlannedKey(read_key_file(path, named_by="the results folder", strip=False), "file")
    else:
        planned = PlannedKey(secrets.token_hex(32).encode(), "new")
    recorded = recorded_key_digests(out)
    if recorded and planned.digest not in recorded.values() and not new_key:
        runs = ", ".join(sorted(recorded)[:5]) + (" ..." if len(recorded) > 5 else "")
        problem = ("redaction.key is missing" if planned.source == "new"
                   else f"${KEY_ENV} is not the key") + f", but runs here were redacted with another key ({runs})."
        raise InputFileError(path, None, problem,
                             f"restore redaction.key or set {KEY_ENV} to the key those runs used; or pass "
                             "--new-redaction-key to start a new key (earlier runs can then no longer be "
                             "rescored, gated or drift-checked), or use another --out.")
    return planned


def persist_key(out: str | Path, planned: PlannedKey) -> PlannedKey:
    """Create ``<out>/redaction.key`` (mode 0600) for a ``new`` key; other sources write nothing.

    Returns:
        The key the run must use: ``planned``, or — when another run created the key file since this one was
        planned (two runs starting together on a new results folder) — the key that file holds (source ``file``),
        so that both runs are redacted with the folder's one key.

    Raises:
        tooleval.storage.OutFolderError: the results folder cannot be written.
        InputFileError: the key file another run created is not a usable key (:func:`read_key_file`).
    """
    if planned.source != "new":
        return planned
    from tooleval.storage import create_bytes

    held = create_bytes(out, "redaction.key", planned.key, mode=0o600)
    if held == planned.key:
        return planned
    return PlannedKey(read_key_file(Path(out) / "redaction.key", named_by="the results folder", strip=False), "file")
