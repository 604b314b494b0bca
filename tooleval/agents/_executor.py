"""Tool executor: answers the live agent's tool calls in a multi-step loop.

A :class:`ToolExecutor` answers a call ``(tool name, argument text)`` with a result *string* that goes back to
the model as a ``{"role": "tool"}`` message. Answers come from, in this order:

1. a Python callable the user registered for that tool name (``executor.register("get_order", fn)``); it is
   called with the parsed arguments as keyword arguments, and a non-string return value is sent as JSON text;
2. recorded data: a mapping ``(tool name, canonical argument JSON) -> result`` (see :meth:`ToolExecutor.record`).

Tool failures are data for the model, never a failed generation: an unknown tool yields ``"Error: unknown tool"``,
and malformed argument text, a missing recorded result or an exception raised by a callable each yield an
``"Error: ..."`` result string.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from tooleval.canonical import canonical_json, parse_arguments

__all__ = ["ToolExecutor", "UNKNOWN_TOOL", "read_tool_results"]

UNKNOWN_TOOL = "Error: unknown tool"
"""Result string for a call to a tool that has neither a callable nor any recorded result."""


def _plain(args: Any) -> Any:
    return dict(args) if isinstance(args, Mapping) and not isinstance(args, dict) else args


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return str(value)


class ToolExecutor:
    """Results for tool calls, from registered Python callables or recorded data.

    Not thread-bound: :meth:`execute` only reads the executor, so one instance serves all worker threads, but
    register and record everything *before* generation starts. Registered callables must themselves be
    thread-safe when ``concurrency > 1``.

    Args:
        recorded: Optional mapping ``(tool name, argument JSON text) -> result``, e.g.
            ``{("get_order", '{"id": "A"}'): {"status": "open"}}``; the text is canonicalised (key order and
            ``250`` vs ``250.0`` do not matter). Results that are not strings are sent as JSON text. For argument
            objects use :meth:`record` or :meth:`from_records`.

    Raises:
        ValueError: a recorded key's arguments are not a JSON object.
    """

    def __init__(self, recorded: Mapping[tuple[str, Any], Any] | None = None) -> None:
        self._recorded: dict[tuple[str, str], str] = {}
        self._callables: dict[str, Callable[..., Any]] = {}
        for (name, args), result in (recorded or {}).items():
            self.record(name, args, result)

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]]) -> "ToolExecutor":
        """Build an executor from ``[{"name", "args", "result"}]`` records (e.g. the lines of a JSONL file)."""
        executor = cls()
        for i, record in enumerate(records):
            if not isinstance(record.get("name"), str) or "result" not in record:
                raise ValueError(f"tool result record #{i} needs a string 'name', 'args' and a 'result'")
            executor.record(record["name"], record.get("args"), record["result"])
        return executor

    def record(self, name: str, args: Mapping[str, Any] | str | None, result: Any) -> None:
        """Add a recorded result for ``name`` called with ``args`` (an object, JSON text, or ``None`` for ``{}``).

        Raises:
            ValueError: ``args`` is not a JSON object (the message carries the parse error).
        """
        parsed, error = parse_arguments(_plain(args))
        if error is not None:
            raise ValueError(f"recorded arguments for {name!r} are not a JSON object: {error}")
        self._recorded[(name, canonical_json(parsed))] = _as_text(result)

    def register(self, name: str, fn: Callable[..., Any]) -> None:
        """Answer every call of tool ``name`` with ``fn(**args)``; it takes precedence over recorded results."""
        if not callable(fn):
            raise TypeError(f"executor for {name!r} must be callable, got {type(fn).__name__}")
        self._callables[name] = fn

    @property
    def tool_names(self) -> list[str]:
        """Sorted names of the tools this executor can answer."""
        return sorted(set(self._callables) | {name for name, _ in self._recorded})

    def execute(self, name: str, arguments: str | Mapping[str, Any] | None) -> str:
        """Run one tool call.

        Args:
            name: Tool name as the model wrote it.
            arguments: The argument JSON text exactly as the model returned it (or an object).

        Returns:
            The result text; ``"Error: ..."`` for an unknown tool, malformed arguments, no recorded result for
            these arguments, or an exception raised by the callable. Never raises for tool-side problems.
        """
        known = name in self._callables or any(key[0] == name for key in self._recorded)
        if not known:
            return UNKNOWN_TOOL
        parsed, error = parse_arguments(_plain(arguments))
        if error is not None:
            return f"Error: malformed arguments for {name}: {error}"
        fn = self._callables.get(name)
        if fn is not None:
            try:
                return _as_text(fn(**parsed))
            except Exception as exc:  # a tool failure is a message to the model, not a failed generation
                return f"Error: {type(exc).__name__}: {exc}"
        result = self._recorded.get((name, canonical_json(parsed)))
        if result is None:
            return f"Error: no recorded result for {name} with these arguments"
        return result

    def digest(self) -> str:
        """sha256 (64 hex) identifying what this executor answers: the recorded results and, for each callable,
        its qualified name and source text when available (cache key part: change a tool, regenerate)."""
        callables = {}
        for name, fn in sorted(self._callables.items()):
            try:
                source = inspect.getsource(fn)
            except (OSError, TypeError):
                source = ""
            qualname = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', type(fn).__name__)}"
            callables[name] = {"callable": qualname, "source_sha256": hashlib.sha256(source.encode()).hexdigest()}
        recorded = sorted([name, args, result] for (name, args), result in self._recorded.items())
        return hashlib.sha256(canonical_json({"callables": callables, "recorded": recorded}).encode()).hexdigest()


def read_tool_results(path: str | Path) -> ToolExecutor:
    """Read a ``--tool-results`` file: JSON lines ``{"name", "args", "result"}`` (``.gz`` read as gzip).

    Raises:
        tooleval.errors.InputFileError: the file is missing or unreadable, or a line is not such a record
            (file and line named).
    """
    from tooleval.capture.recorded import iter_json_lines
    from tooleval.errors import InputFileError

    path = Path(path)
    executor = ToolExecutor()
    fix = "fix that line (docs/live.md shows the format)."
    for line in iter_json_lines(path, missing="tool results file not found.", fix="check the --tool-results path.",
                                unique_keys=True):
        data = line.data
        if not isinstance(data, dict) or not isinstance(data.get("name"), str) or "result" not in data:
            raise InputFileError(path, line.line, "a tool result line must be an object with a string 'name', "
                                 "'args' and a 'result'.", fix)
        try:
            executor.record(data["name"], data.get("args"), data["result"])
        except ValueError as exc:
            raise InputFileError(path, line.line, f"{exc}.", "make 'args' a JSON object.") from None
        except RecursionError:
            raise InputFileError(path, line.line, "nested too deeply to read.", fix) from None
    return executor
