"""The command group of ``tooleval``: global options accepted after the subcommand, and flags shown as flags.

Two habits of a newcomer that click refuses or misleads: ``tooleval runs -q`` (click only knows the group's
options before the subcommand name) and reading ``--gate <bool>`` in ``--help`` as an option that takes a value
(typer labels a flag with its Python type).
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperGroup

__all__ = ["ToolevalGroup", "GLOBAL_FLAGS"]

GLOBAL_FLAGS = ("--quiet", "-q", "--version")
"""The group's options that take no value and may also be written after the subcommand."""


def _is_option(param: Any) -> bool:
    # typer ships its own copy of click: its parameters are not ``click.Option`` instances
    return getattr(param, "param_type_name", None) == "option"


def _is_flag(param: Any) -> bool:
    return bool(getattr(param, "is_flag", False) or getattr(param, "count", False))


def _flags_shown_as_flags(params: list[Any]) -> list[Any]:
    """Give every flag an empty metavar: typer's help shows ``<bool>`` beside a flag otherwise, as if
    ``--gate`` took a value (click never reads one: ``--gate true`` makes ``true`` an argument)."""
    for param in params:
        if param is not None and _is_option(param) and _is_flag(param) and param.metavar is None:
            param.metavar = ""
    return params


class ToolevalGroup(TyperGroup):
    """``tooleval``'s group: see the module docstring."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _flags_shown_as_flags(super().get_params(ctx))

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            # its --help option is made apart from its parameters (and kept once made)
            _flags_shown_as_flags([*command.params, command.get_help_option(ctx)])
        return command

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, self.global_flags_first(ctx, list(args)))

    def global_flags_first(self, ctx: Any, args: list[str]) -> list[str]:
        """``args`` with the global flags written after the subcommand moved before it (``runs -q`` ->
        ``-q runs``). A token is moved only where the subcommand would read it as an option of its own that it
        does not define: never the value of one of its options (``--run-id -q``), nothing after ``--``."""
        position = 0
        while position < len(args) and args[position] in GLOBAL_FLAGS:
            position += 1
        if position >= len(args) or args[position].startswith("-"):
            return args
        command = super().get_command(ctx, args[position])
        if command is None:
            return args
        own, takes_value = set(), set()
        for param in command.params:
            if _is_option(param):
                names = [*param.opts, *param.secondary_opts]
                own.update(names)
                if not _is_flag(param):
                    takes_value.update(names)
        moved, kept = [], []
        rest = iter(args[position + 1:])
        for token in rest:
            if token == "--":
                kept.append(token)
                kept.extend(rest)
                break
            if token in GLOBAL_FLAGS and token not in own:
                moved.append(token)
                continue
            kept.append(token)
            if token in takes_value:  # its value follows, whatever it looks like
                value = next(rest, None)
                if value is not None:
                    kept.append(value)
        return args[:position] + moved + args[position:position + 1] + kept
