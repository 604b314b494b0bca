"""The viewer (``tooleval view``): a local web server over a results folder's published runs, each page a few
DuckDB queries over the committed Parquet files (never a whole run in memory); no Prefect.

Import these names from here (each is imported on first use: :mod:`tooleval.faces`); modules whose names start
with ``_`` are this package's own.
"""

from tooleval.faces import lazy_face

_EXPORTS = {
    "LOOPBACK": "tooleval.view._app",
    "create_app": "tooleval.view._app",
    "serve": "tooleval.view._app",
    "FACETS": "tooleval.view._data",
    "PAGE_SIZES": "tooleval.view._data",
    "RowFilter": "tooleval.view._data",
    "SORTS": "tooleval.view._data",
    "Store": "tooleval.view._data",
    "ViewError": "tooleval.view._data",
    "diff_table": "tooleval.view._data",
    "mark_calls": "tooleval.view._data",
}
"""Public name -> the module that defines it."""

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_face(__name__, _EXPORTS)
