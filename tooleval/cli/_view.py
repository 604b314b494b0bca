"""``tooleval view``: the local web viewer of the runs of a results folder or of results on object storage."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tooleval.errors import InputFileError

from tooleval.cli._app import UrlOutOption, app, fail, open_results


@app.command()
def view(
    out: UrlOutOption = Path("results"),
    port: Annotated[int, typer.Option(min=1, max=65535, help="TCP port.")] = 8765,
    host: Annotated[str, typer.Option(help="Address to serve on; anything but 127.0.0.1 serves the runs to other "
                                           "machines (and says so).")] = "127.0.0.1",
) -> None:
    """Serve a web viewer of the runs under --out (a folder or a URL such as s3://bucket/prefix) at
    http://HOST:PORT/ until Ctrl-C: the runs, a run's rows (filtered, sorted and paged on the server), a row's
    evidence and two runs compared. No Prefect; on object storage each page reads only what it shows.

    Exit 2: --out is not a results folder, its bucket cannot be reached, or the port cannot be bound.
    """
    from tooleval.view import serve

    try:
        # the viewer only reads: on a bucket it leaves an interrupted publication to the next writer, as sql does
        location = open_results(out, remote=True, writes=False)
        if isinstance(location, Path) and not location.is_dir():
            raise InputFileError(out, None, "no results folder here.", "pass --out with the folder `tooleval run` "
                                 "wrote (default: results).")
    except InputFileError as exc:
        fail(exc)
    try:
        serve(location, host=host, port=port)
    except OSError as exc:
        fail(InputFileError(None, None, f"cannot serve on {host}:{port}: {exc.strerror or exc}.",
                            "pick another --port (or stop what listens there)."))
