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
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from tooleval.errors import InputFileError

__all__ = ["KEY_ENV", "KEY_FILE_ENV", "PlannedKey", "environment_key", "plan_key", "persist_key",
           "recorded_key_digests"]

KEY_ENV = "TOOLEVAL_REDACTION_KEY"
KEY_FILE_ENV = "TOOLEVAL_REDACTION_KEY_FILE"


def environment_key() -> bytes | None:
    """The key this process's environment names: ``$TOOLEVAL_REDACTION_KEY``'s text, else the bytes of the file
    ``$TOOLEVAL_REDACTION_KEY_FILE`` names (surrounding whitespace stripped), else ``None``.

    Raises:
        InputFileError: the key file is unreadable or empty.
    """
    text = os.environ.get(KEY_ENV)
    if text:
        return text.encode()
    name = os.environ.get(KEY_FILE_ENV)
    if not name:
        return None
    path = Path(name)
    try:
        key = path.read_bytes().strip()
    except OSError as exc:
        raise InputFileError(path, None, f"cannot read the redaction key file named by ${KEY_FILE_ENV} "
                             f"({exc.strerror or exc}).", "fix the path or its permissions on this machine.") from None
    if not key:
        raise InputFileError(path, None, f"the redaction key file named by ${KEY_FILE_ENV} is empty.",
                             "write the key into it (e.g. openssl rand -hex 32 > FILE).")
    return key


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
            another key exist under ``out``, and ``new_key`` is false; or the key file is unreadable.
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
    elif (path := Path(out).absolute() / "redaction.key").is_file():
        try:
            return PlannedKey(path.read_bytes(), "file")
        except OSError as exc:
            raise InputFileError(path, None, f"cannot read the redaction key ({exc.strerror}).",
                                 "fix its permissions, or set TOOLEVAL_REDACTION_KEY.") from None
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
    """
    if planned.source != "new":
        return planned
    from tooleval.storage import create_bytes

    held = create_bytes(out, "redaction.key", planned.key, mode=0o600)
    return planned if held == planned.key else PlannedKey(held, "file")
