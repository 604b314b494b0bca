"""Shards on an existing Dask cluster: ``tooleval run --dask-address tcp://HOST:PORT``, for a corpus that
outgrows one machine.

The flow runs in the client process (``tooleval run``); each shard (:func:`flows._shards.run_shard`, with its
nested stage tasks) runs on a Dask worker through prefect-dask's ``DaskTaskRunner``. What travels to a worker is
the shard's work items, the run's :class:`flows._shards.ShardContext` (paths, digests, the redaction *config*
whose key is only a sha256) and Prefect's serialized context: all importable from ``pip install tooleval``. The
redaction key itself never travels: a worker reads it from its own ``TOOLEVAL_REDACTION_KEY`` or
``TOOLEVAL_REDACTION_KEY_FILE`` (:mod:`tooleval.capture.keys`).

A worker that dies mid-shard loses only that shard's in-flight work: Dask's scheduler resubmits the shard to
another worker (up to its ``allowed-failures``, 3 by default), stage files are content-addressed and renamed into
place (a half-written file is never seen), and nothing is published before every shard is back. A shard that
raises is retried by Prefect (:data:`SHARD_RETRIES`).
"""

from __future__ import annotations

import re
import socket
from typing import Any

from tooleval.errors import InputFileError

__all__ = ["SHARD_RETRIES", "check_scheduler", "dask_runner", "dask_workers", "parse_address", "shard_task"]

SHARD_RETRIES = 2
"""Prefect retries of a shard that raised on a Dask worker (a lost worker is Dask's own resubmission)."""

_ADDRESS = re.compile(r"(?P<scheme>tcp|tls)://(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(?P<port>\d{1,5})")


def parse_address(address: str) -> tuple[str, int]:
    """``(host, port)`` of a scheduler address such as ``tcp://127.0.0.1:8786``.

    Raises:
        InputFileError: not ``tcp://HOST:PORT`` (or ``tls://``), or the port is out of range.
    """
    match = _ADDRESS.fullmatch(address.strip())
    if match is None or not 0 < int(match["port"]) < 65536:
        raise InputFileError(None, None, f"--dask-address {address!r} is not a Dask scheduler address.",
                             "pass tcp://HOST:PORT, e.g. tcp://127.0.0.1:8786 (what `dask scheduler` prints).")
    return match["host"].strip("[]"), int(match["port"])


def check_scheduler(address: str, timeout_s: float = 10.0) -> None:
    """Refuse an unreachable scheduler before the flow starts (exit 2, nothing written).

    Raises:
        InputFileError: a bad address, or no TCP connection to it within ``timeout_s`` seconds.
    """
    host, port = parse_address(address)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as exc:
        raise InputFileError(None, None, f"cannot reach the Dask scheduler at {address} ({exc}).",
                             "start one with `dask scheduler` (and workers with `dask worker ADDRESS`), or "
                             "check the address and the firewall.") from None


def dask_runner(address: str) -> Any:
    """prefect-dask's ``DaskTaskRunner`` connected to the existing scheduler at ``address`` (no local cluster).

    Raises:
        InputFileError: a bad address.
        ImportError: the ``[dask]`` extra is not installed (``pip install 'tooleval[dask]'``).
    """
    parse_address(address)
    from prefect_dask import DaskTaskRunner

    return DaskTaskRunner(address=address)


def dask_workers(runner: Any) -> int:
    """Threads of the cluster ``runner`` is connected to (at least 2: shards are then submitted, never run inline
    in the client); it sizes how many shards are in flight at once."""
    return max(2, sum(runner.client.nthreads().values()))


def shard_task(task: Any) -> Any:
    """``task`` with :data:`SHARD_RETRIES` Prefect retries on a Dask runner; unchanged on the local runners."""
    from prefect.context import FlowRunContext

    runner = getattr(FlowRunContext.get(), "task_runner", None)
    if type(runner).__name__ == "DaskTaskRunner":
        return task.with_options(retries=SHARD_RETRIES, retry_delay_seconds=1)
    return task
