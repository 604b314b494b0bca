"""Conditional writes on S3: a PUT that succeeds only if the object is absent (``If-None-Match: *``) or still
the version read (``If-Match: <ETag>``), and a DELETE with ``If-Match``.

The writer lease and the commit marker need a compare-and-swap, which S3 has offered since 2024 (MinIO and moto's
server implement it too). s3fs does not pass these headers, so this module talks to the store with boto3
directly, configured like the results' s3fs filesystem (its endpoint and keys when it was given any, else the
standard AWS environment that both read: ``AWS_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL_S3``, ``AWS_ACCESS_KEY_ID``,
...), so both see the same store.

A store that does not implement a condition either answers ``501 Not Implemented`` (or ``NotImplemented``) or
ignores the header and overwrites. :func:`conditional_store` recognises both — the second by re-creating a lease
object it just created with ``If-None-Match: *``, which an honouring store refuses — and the callers then fall
back to a protocol without conditions (:mod:`tooleval.storage._remote_lease`), with a warning.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from tooleval.storage._fs import RemoteTree

__all__ = ["ConditionalStore", "PreconditionFailed", "ConditionsUnsupported", "conditional_store"]

logger = logging.getLogger(__name__)


class PreconditionFailed(Exception):
    """The object is not in the state the write required (it exists, or carries another ETag, or is gone)."""


class ConditionsUnsupported(Exception):
    """The store refused or ignored a conditional request: it does not implement conditional writes."""


_CLIENTS: dict[tuple, Any] = {}
_CLIENTS_LOCK = threading.Lock()


def _client(fs: Any) -> Any:
    """A boto3 S3 client aimed where the s3fs filesystem ``fs`` is (one per configuration and process; boto3
    clients are thread-safe)."""
    client_kwargs = dict(getattr(fs, "client_kwargs", None) or {})
    endpoint = getattr(fs, "endpoint_url", None) or client_kwargs.get("endpoint_url")
    region = client_kwargs.get("region_name")
    key, secret, token = getattr(fs, "key", None), getattr(fs, "secret", None), getattr(fs, "token", None)
    profile = (getattr(fs, "kwargs", None) or {}).get("profile")
    # what botocore reads from the environment belongs to the key as well: a client made before the environment
    # changed (another endpoint or credentials) must not be reused
    environment = tuple(os.environ.get(name) for name in (
        "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
        "AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE"))
    cache_key = (endpoint, region, key, secret, token, profile, environment)
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(cache_key)
        if client is None:
            import boto3
            from botocore.config import Config

            session = boto3.session.Session(aws_access_key_id=key, aws_secret_access_key=secret,
                                            aws_session_token=token, profile_name=profile)
            # "standard" retries re-send a request whose answer was lost; a retried conditional PUT that had in
            # fact succeeded then fails its condition, which the lease resolves by reading its own token back
            client = session.client("s3", endpoint_url=endpoint, region_name=region,
                                    config=Config(retries={"mode": "standard", "max_attempts": 4}))
            _CLIENTS[cache_key] = client
    return client


def _error_code(exc: Any) -> tuple[str, int]:
    response = getattr(exc, "response", None) or {}
    return (str(response.get("Error", {}).get("Code", "")),
            int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0))


class ConditionalStore:
    """Conditional reads and writes of small objects under one ``s3://bucket/prefix`` (relative paths, as a
    :class:`~tooleval.storage._fs.RemoteTree`).

    Args:
        tree: The results tree on S3.
    """

    def __init__(self, tree: RemoteTree) -> None:
        self.tree = tree
        self.bucket, _, self.prefix = tree.root.partition("/")
        self.client = _client(tree.fs)

    def _key(self, relpath: str) -> str:
        return f"{self.prefix}/{relpath}" if self.prefix else relpath

    def _raise(self, exc: Exception, relpath: str) -> None:
        code, status = _error_code(exc)
        if status == 412 or code in ("PreconditionFailed", "ConditionalRequestConflict") or status == 409:
            raise PreconditionFailed(relpath) from None
        if code in ("NoSuchKey", "404") or status == 404:
            raise PreconditionFailed(relpath) from None  # If-Match on an object that is gone
        if status == 501 or code == "NotImplemented":
            raise ConditionsUnsupported(f"{self.tree.location(relpath)}: {code or status}") from None
        raise OSError(f"{self.tree.location(relpath)}: the object store answered {code or status} ({exc})") from None

    def get(self, relpath: str) -> tuple[bytes, str] | None:
        """``(content, ETag)`` of the object, or None when there is none.

        Raises:
            OSError: the store cannot be read (credentials, endpoint, network).
        """
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            answer = self.client.get_object(Bucket=self.bucket, Key=self._key(relpath))
            return answer["Body"].read(), answer["ETag"]
        except ClientError as exc:
            code, status = _error_code(exc)
            if code in ("NoSuchKey", "404") or status == 404:
                return None
            raise OSError(f"{self.tree.location(relpath)}: the object store answered {code or status}") from None
        except BotoCoreError as exc:
            raise OSError(f"{self.tree.location(relpath)}: {exc}") from None

    def put(self, relpath: str, data: bytes, *, if_match: str | None = None, create: bool = False) -> str:
        """Write the object whole if it is absent (``create``) or still carries ETag ``if_match``; return its new
        ETag. Without either condition the write is unconditional.

        Raises:
            PreconditionFailed: the condition does not hold (the object exists; another ETag; gone).
            ConditionsUnsupported: the store does not implement the condition (501).
            OSError: any other refusal (credentials, endpoint, network).
        """
        from botocore.exceptions import BotoCoreError, ClientError

        options: dict[str, str] = {}
        if create:
            options["IfNoneMatch"] = "*"
        if if_match is not None:
            options["IfMatch"] = if_match
        try:
            return self.client.put_object(Bucket=self.bucket, Key=self._key(relpath), Body=data,
                                          ContentType="application/json", **options)["ETag"]
        except ClientError as exc:
            self._raise(exc, relpath)
        except BotoCoreError as exc:
            raise OSError(f"{self.tree.location(relpath)}: {exc}") from None
        raise AssertionError("unreachable")

    def delete(self, relpath: str, *, if_match: str) -> None:
        """Delete the object if it still carries ETag ``if_match``.

        Raises:
            PreconditionFailed: it carries another ETag, or is gone.
            ConditionsUnsupported: the store does not implement a conditional delete.
            OSError: any other refusal.
        """
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.delete_object(Bucket=self.bucket, Key=self._key(relpath), IfMatch=if_match)
        except ClientError as exc:
            self._raise(exc, relpath)
        except BotoCoreError as exc:
            raise OSError(f"{self.tree.location(relpath)}: {exc}") from None


_SUPPORT: dict[tuple, bool] = {}
_WARNED: set[str] = set()


def warn_unconditional(location: str, why: str) -> None:
    """Log once per store that the lease and the marker fall back to the protocol without conditional writes."""
    if location in _WARNED:
        return
    _WARNED.add(location)
    logger.warning("%s: %s; the writer lease falls back to write, wait and read back, which two writers stalled "
                   "between their read and their write can both pass (see docs/cluster.md, 'The lease on object "
                   "storage'). Give concurrent writers distinct run ids.", location, why)


def conditional_store(tree: RemoteTree) -> ConditionalStore | None:
    """The :class:`ConditionalStore` of an ``s3://`` tree, or None (with a warning, once) for another protocol
    or a store already found not to honour conditions (:func:`mark_unsupported`)."""
    if tree.protocol not in ("s3", "s3a"):
        warn_unconditional(tree.url, f"conditional writes are used on s3:// only, not {tree.protocol}://")
        return None
    try:
        import boto3  # noqa: F401  (the [dask] extra installs it beside s3fs)
    except ImportError:
        warn_unconditional(tree.url, "boto3 is not installed (pip install 'tooleval[dask]')")
        return None
    store = ConditionalStore(tree)
    if _SUPPORT.get(_support_key(store)) is False:
        return None
    return store


def _support_key(store: ConditionalStore) -> tuple:
    return (id(store.client), store.bucket)


def mark_unsupported(store: ConditionalStore, why: str) -> None:
    """Remember for this process that ``store``'s bucket does not honour conditional writes, and warn."""
    _SUPPORT[_support_key(store)] = False
    warn_unconditional(store.tree.url, f"the object store does not honour conditional writes ({why})")


def check_honoured(store: ConditionalStore, relpath: str, data: bytes) -> bool:
    """Whether the store honours ``If-None-Match: *``: re-create ``relpath`` (just created with ``data``) with
    the same bytes; an honouring store refuses. Checked once per bucket and process. A store that ignores the
    header has rewritten the same bytes, so nothing changed."""
    key = _support_key(store)
    if key in _SUPPORT:
        return _SUPPORT[key]
    try:
        store.put(relpath, data, create=True)
    except PreconditionFailed:
        _SUPPORT[key] = True
        return True
    except ConditionsUnsupported as exc:
        mark_unsupported(store, str(exc))
        return False
    mark_unsupported(store, "it accepted If-None-Match: * on an existing object")
    return False
