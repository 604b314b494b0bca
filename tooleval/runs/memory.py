"""How a process tooleval owns keeps its memory: allocators that give freed memory back to the operating system.

Light on purpose (no pyarrow import): the command calls it first thing, before it knows whether the work runs in
this process or is handed to a warm runner.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import sys

__all__ = ["return_freed_memory", "glibc_function", "MMAP_THRESHOLD", "WORKER_MMAP_THRESHOLD"]

MMAP_THRESHOLD = 128 << 10
"""Bytes from which glibc serves a block with its own ``mmap`` and unmaps it when it is freed, in the flow's
process: glibc's initial value, which :func:`return_freed_memory` keeps fixed."""
WORKER_MMAP_THRESHOLD = 1 << 20
"""The same in a run's pool worker: higher, because each block mmapped and unmapped costs CPU, and trace capture
allocates many blocks above 128 KiB on long traces (tau's capture cost ~14 % more CPU with 128 KiB, ~7 % with
1 MiB; ``bench/row_path_stages.py``, alternated, noisy)."""
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number for it, from glibc's <malloc.h>
_ARROW_POOL_ENV = "ARROW_DEFAULT_MEMORY_POOL"
_done: list[bool] = []


@functools.lru_cache(maxsize=None)
def glibc_function(name: str):
    """The C library's function ``name`` (``malloc_trim``, ``mallopt``: glibc's, for its allocator), or ``None``
    where the C library has none (macOS, musl)."""
    try:
        return getattr(ctypes.CDLL(ctypes.util.find_library("c")), name)
    except (OSError, AttributeError, TypeError):
        return None


def return_freed_memory(mmap_threshold: int | None = MMAP_THRESHOLD) -> None:
    """Make this process's allocators give freed memory back as it is freed, for a process tooleval owns (the
    command's, a warm runner's, a run's pool workers; not a caller's notebook, whose Arrow pool it would change):
    Arrow's buffers come from the system allocator instead of mimalloc, and glibc's ``mmap`` threshold stays at
    ``mmap_threshold`` bytes (``None``: glibc's own, raised as it goes; a pool worker passes
    :data:`WORKER_MMAP_THRESHOLD`).

    Before pyarrow is imported, Arrow's choice is made through ``ARROW_DEFAULT_MEMORY_POOL=system``, which Arrow
    reads when it is imported, here and in the processes this one starts (the pool's workers); after, by
    ``pyarrow.set_memory_pool``. Once per process. What the user chose stays: an ``ARROW_DEFAULT_MEMORY_POOL`` or
    ``MALLOC_MMAP_THRESHOLD_`` already in the environment is left alone, and so is a C library that is not glibc.

    Why: a run's processes allocate and free large buffers shard after shard, and neither default gave them back.
    mimalloc kept the freed pages of every thread that had allocated them (the publication's, Arrow's readers'),
    also after :func:`tooleval.runs.shards.release_free_memory`: ~100 MB stayed in a flow's process after a
    200,000-row bfcl run. glibc raises its ``mmap`` threshold after each large block it frees (up to 32 MB), so
    later large blocks came from its heaps, whose free pages ``malloc_trim`` cannot return while small live blocks
    sit among them. Measured with ``tooleval bench --rows 1000000 --profile bfcl`` (the run's processes sampled
    every 0.5 s): the runs' peak fell from 2,039-2,125 MB to 1,701 MB at the same speed; a flow's process after a
    200,000-row run held ~325 MB instead of ~450 (~375 with the Arrow pool alone, ~418 with the threshold alone).

    On 1,000,000 bfcl rows the flow's threshold made ~120 MB of that peak (1,905 MB with the Arrow pool alone). On
    200,000 tau rows the run's peak was 1,521 MB with 128 KiB in every process, 1,532 with 1 MiB in every process
    and 1,636 with glibc's own threshold in the workers.
    """
    if _done:
        return
    _done.append(True)
    if not os.environ.get(_ARROW_POOL_ENV):
        if "pyarrow" in sys.modules:
            import pyarrow as pa

            pa.set_memory_pool(pa.system_memory_pool())
        else:
            os.environ[_ARROW_POOL_ENV] = "system"
    if mmap_threshold is None or os.environ.get("MALLOC_MMAP_THRESHOLD_"):
        return
    mallopt = glibc_function("mallopt")
    if mallopt is not None:  # fixing the threshold also turns off glibc's raising of it
        mallopt(_M_MMAP_THRESHOLD, mmap_threshold)
