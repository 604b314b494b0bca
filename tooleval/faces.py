"""A package's face that imports its names on first use (PEP 562), shared by the packages of the house.

A package's ``__init__`` lists its public names and the module that defines each; importing the package then
costs nothing until a name is asked for, so the command line's entry point, or a worker that needs one stage,
does not pay for the modules it never uses.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any, Callable

__all__ = ["lazy_face"]


def lazy_face(package: str, exports: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of a package whose public names are ``exports``.

    Args:
        package: The package's ``__name__``.
        exports: Public name -> dotted name of the module that defines it.

    Returns:
        ``(__getattr__, __dir__)`` to assign in the package's ``__init__``. The first import of a name stores it
        in the package's namespace, so later look-ups are plain attribute reads.

    Raises:
        AttributeError: (from ``__getattr__``) the name is not one of ``exports``.
    """
    namespace = import_module(package).__dict__

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
