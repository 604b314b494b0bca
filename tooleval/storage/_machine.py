"""What one machine keeps for itself when results or inputs live on object storage: its own state folder for an
``s3://`` results location (Prefect's home, a live agent's generation store), local copies of input URLs (``--dataset
s3://…``, ``--traces s3://…``), and the reachability check of a results URL.

Such state is per machine and never belongs on shared storage; it lives under ``$XDG_CACHE_HOME/tooleval`` (or
``~/.cache/tooleval``).
"""

from __future__ import annotations

import os
from pathlib import Path

from tooleval.storage._fs import RemoteTree, as_location, filesystem

__all__ = ["local_state_dir", "check_remote", "local_copy"]


def local_state_dir(out: str | Path, name: str) -> Path:
    """Where this machine keeps its own state for the results at ``out`` (Prefect's home, a live agent's
    generation store): ``<out>/.tooleval/<name>`` for a folder; for a URL, a folder of this machine's cache
    (``$XDG_CACHE_HOME`` or ``~/.cache``, then ``tooleval/<16 hex of the URL's sha256>/<name>``), since such
    state is per machine and never belongs on shared storage. Not created here."""
    import hashlib

    location = as_location(out) if isinstance(out, str) else Path(out)
    if isinstance(location, Path):
        return location / ".tooleval" / name
    return cache_root() / hashlib.sha256(location.encode()).hexdigest()[:16] / name


def check_remote(url: str) -> None:
    """Check, before anything is written, that the results URL can be reached: its bucket exists and the
    credentials are accepted (one listing request).

    Raises:
        OutFolderError: no credentials, access denied, no such bucket, or the endpoint does not answer; the
            message names the standard variables (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
            ``AWS_ENDPOINT_URL``).
    """
    from tooleval.storage._paths import OutFolderError

    fix = ("check the credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or the filesystem's own standard "
           "variables), the endpoint (AWS_ENDPOINT_URL for an S3-compatible server) and that the bucket exists.")
    tree = RemoteTree(url)
    bucket = tree.root.split("/", 1)[0]
    try:
        tree.fs.info(bucket)
        found = True
    except FileNotFoundError:
        found = False
    except Exception as exc:  # botocore's NoCredentialsError, ClientError, connection errors: not OSError
        raise OutFolderError(url, None, f"cannot reach the results location ({type(exc).__name__}: {exc}).",
                             fix) from None
    if not found:
        raise OutFolderError(url, None, f"bucket {bucket!r} does not exist (or these credentials cannot see it).",
                             "create it first (e.g. `aws s3 mb s3://BUCKET`), or " + fix)


def cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tooleval"


def local_copy(location: str | Path) -> Path:
    """A local path with the content at ``location``: the path itself for a folder or file (``file://`` too);
    for a URL (``--dataset s3://…``, ``--traces s3://…``), a copy in this machine's cache, fetched once per
    version of the objects.

    The copy lives in ``$XDG_CACHE_HOME/tooleval/inputs/<16 hex of the URL's sha256>/<16 hex of its
    fingerprint>/``, where the fingerprint is every object's relative name, size and ETag (or modification time):
    a changed object is fetched anew, an unchanged one never twice. The copy is downloaded to a temporary folder
    and renamed into place, so concurrent processes of one machine never read a partial copy. As with local
    inputs, a dataset whose content digest differs from the planned one is refused by the shard that loads it;
    a traces file replaced in the middle of a run is not detected (the same holds for a local file).

    Raises:
        InputFileError: nothing at the URL, or it cannot be read (credentials, endpoint).
    """
    import hashlib
    import json
    import shutil
    import tempfile

    from tooleval.errors import InputFileError

    found = as_location(location) if isinstance(location, str) else Path(location)
    if isinstance(found, Path):
        return found
    fs, root = filesystem(found)
    root = root.rstrip("/")
    try:
        info = fs.info(root)
        is_folder = info.get("type") == "directory"
        objects = fs.find(root, detail=True) if is_folder else {root: info}
    except FileNotFoundError:
        raise InputFileError(found, None, "nothing is stored at this URL.", "check the URL (bucket and prefix).") from None
    except Exception as exc:  # credentials, endpoint: botocore's errors are not OSError
        raise InputFileError(found, None, f"cannot read it ({type(exc).__name__}: {exc}).",
                             "check the credentials and the endpoint (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, "
                             "AWS_ENDPOINT_URL).") from None
    if not objects:
        raise InputFileError(found, None, "nothing is stored under this URL.", "check the URL (bucket and prefix).")
    stamps = sorted((path[len(root):], meta.get("size"), str(meta.get("ETag") or meta.get("etag")
                                                              or meta.get("mtime") or meta.get("LastModified")))
                    for path, meta in objects.items())
    fingerprint = hashlib.sha256(json.dumps(stamps, default=str).encode()).hexdigest()[:16]
    name = root.rsplit("/", 1)[-1] or "input"
    folder = cache_root() / "inputs" / hashlib.sha256(found.encode()).hexdigest()[:16] / fingerprint
    target = folder / name
    if not target.exists():
        folder.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".fetch-", dir=folder))
        try:
            for path in objects:
                local = staging / name / path[len(root):].lstrip("/") if is_folder else staging / name
                local.parent.mkdir(parents=True, exist_ok=True)
                fs.get_file(path, str(local))
            try:
                os.replace(staging / name, target)
            except OSError:
                if not target.exists():  # another process of this machine won the rename: use its copy
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target
