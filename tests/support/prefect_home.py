"""Prefect homes for tests whose ``tooleval`` processes need a Prefect home of their own but do not test what
happens in a new one (``cli/test_fresh_machine.py`` does).

A Prefect server started on a home without a database builds one, migration by migration: about 6 s of CPU before
it answers, in every such test. :func:`seeded_home` gives the home a copy of a database migrated once per test
session instead (the same Prefect version builds the same schema), so its server answers as soon as it starts, as
on the second run of a real user.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["seeded_home"]

_MIGRATE = "import asyncio; from prefect.server.database import provide_database_interface; " \
           "asyncio.run(provide_database_interface().create_db())"


def _template() -> Path:
    """The session's migrated ``prefect.db``, built by the first worker that asks (the others wait for it)."""
    import prefect

    folder = os.environ.get("TOOLEVAL_TEST_TEMPLATE_DIR")  # the session's (tests/conftest.py), removed after it
    if folder is None:  # outside a pytest session of this suite: one per process, left in the temporary folder
        name = f"tooleval-test-prefect-template-{os.getuid()}-{prefect.__version__}-pid{os.getpid()}"
        folder = Path(tempfile.gettempdir()) / name
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    database = folder / "prefect.db"
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not database.exists():
            env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "TOOLEVAL_"))}
            building = folder / "building"
            shutil.rmtree(building, ignore_errors=True)
            subprocess.run([sys.executable, "-c", _MIGRATE], env={**env, "PREFECT_HOME": str(building)},
                           check=True, capture_output=True, timeout=300)
            os.replace(building / "prefect.db", database)
    return database


def seeded_home(home: Path) -> Path:
    """``home`` (made if missing) holding a copy of an already migrated Prefect database; returns ``home``.

    Raises:
        subprocess.CalledProcessError: the template database could not be built.
    """
    home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_template(), home / "prefect.db")
    return home
