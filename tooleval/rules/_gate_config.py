"""The release-gate configuration: ``datasets/<name>/gate.toml`` (format in docs/rules.md).

A dataset ships its own gate.toml; ``tooleval gate --config FILE`` may name another. Its tables:

* ``[policy]`` — how rows are *checked* (:class:`~tooleval.rules.PolicyConfig`); read from the dataset's own
  gate.toml when the rows are scored.
* everything else — how the gate *judges* rows: ``[severity]`` per rule, ``[tool_schema]`` (the tools whose
  schema findings block), advisory ``[f1]`` thresholds, per-slice
  floors ``[slices.<slice>]`` and per-tool-family floors ``[families.<family>]``, ``[[waivers]]`` and
  ``[[quarantine]]``.

Unreadable TOML, unknown keys and invalid values are file errors (:class:`~tooleval.errors.InputFileError`, exit
2) naming the file, the line (when it can be found) and the fix.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from datetime import date
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from tooleval.errors import InputFileError
from tooleval.rules._policy import RULE_NAMES, PolicyConfig, Severity

__all__ = ["GATE_RULES", "MISMATCH_RULE", "ROW_OUTCOMES", "RowOutcomeName", "Floor", "ToolSchemaGate", "F1Advisory",
           "Waiver", "QuarantineEntry", "GateConfig", "load_gate_config", "load_policy"]

MISMATCH_RULE = "reference_mismatch"
"""The gate's rule for a scored row whose calls do not match the reference (``exact_match`` false) under the row
outcome ``match``."""

GATE_RULES = RULE_NAMES + ("row_error", "unscored", MISMATCH_RULE)
"""Rules the gate knows: the 15 violation rules (``tool_schema`` and ``args_not_captured`` included),
``row_error`` (a row that could not be scored), ``unscored`` (a case in the run's scope with no row at all, or a
trace that made no row) and ``reference_mismatch`` (calls that differ from the reference, under the row outcome
``match``)."""

RowOutcomeName = Literal["match", "no_blocking"]

ROW_OUTCOMES: dict[str, str] = {
    "match": ("its calls match the reference under the case's match mode (calls_match; by default unordered: "
              "fp = 0 and fn = 0) and no blocking rule fires"),
    "no_blocking": "no blocking rule fires (its calls may differ from the reference)",
}
"""When a row passes, per row outcome: the words the gate's output and ``summary.json`` use."""


def _known_rule(rule: str) -> str:
    if rule not in GATE_RULES:
        raise ValueError(f"unknown rule {rule!r}; known rules: {', '.join(GATE_RULES)}")
    return rule


class Floor(BaseModel):
    """Floors of one slice or tool family. Failing any of them fails the gate (unlike ``[f1]``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_rows: int = Field(default=1, ge=0)
    """Fewest (non-quarantined) rows; a configured slice missing from the run has 0 and fails."""
    min_mean_f1: float | None = Field(default=None, ge=0, le=1)
    min_exact_match_rate: float | None = Field(default=None, ge=0, le=1)


class F1Advisory(BaseModel):
    """``[f1]``: run-wide thresholds that only produce advisories: a run-wide mean hides which
    cases fell, so only a per-slice F1 threshold may block."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_mean: float | None = Field(default=None, ge=0, le=1)
    min_exact_match_rate: float | None = Field(default=None, ge=0, le=1)


class Waiver(BaseModel):
    """``[[waivers]]``: a case, a rule, or a rule on one case stops blocking until ``expires`` (inclusive).

    Waived rows stay in every report. A waiver past its date fails the gate until it is renewed or removed.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    case: str | None = None
    rule: str | None = None
    owner: str = Field(min_length=1)
    reason: str = Field(min_length=1)
    expires: date

    @field_validator("rule")
    @classmethod
    def _rule_known(cls, value: str | None) -> str | None:
        return None if value is None else _known_rule(value)

    @model_validator(mode="after")
    def _names_something(self) -> "Waiver":
        if self.case is None and self.rule is None:
            raise ValueError("a waiver names a case, a rule, or both")
        return self

    def expired(self, today: date) -> bool:
        """True from the day after ``expires``."""
        return today > self.expires

    def covers(self, case_id: str, rule: str) -> bool:
        return (self.case is None or self.case == case_id) and (self.rule is None or self.rule == rule)

    def to_dict(self) -> dict:
        return {"case": self.case, "rule": self.rule, "owner": self.owner, "reason": self.reason,
                "expires": self.expires.isoformat()}


class QuarantineEntry(BaseModel):
    """``[[quarantine]]``: a case whose rows leave the blocking totals (and the floors) but stay in every report."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    case: str = Field(min_length=1)
    owner: str = Field(min_length=1)
    reason: str = Field(min_length=1)

    def to_dict(self) -> dict:
        return {"case": self.case, "owner": self.owner, "reason": self.reason}


class ToolSchemaGate(BaseModel):
    """``[tool_schema]``: schema findings (rule ``tool_schema``) are advisory except for the tools named here."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    blocking_tools: list[str] = Field(default_factory=list)
    """Tools whose calls block when they depart from their tools.json schema (an undeclared tool: its call's
    name). ``[severity] tool_schema = "blocking"`` makes every tool's findings block."""

    @field_validator("blocking_tools")
    @classmethod
    def _sorted(cls, value: list[str]) -> list[str]:
        return sorted(set(value))


class GateConfig(BaseModel):
    """A whole gate.toml. ``GateConfig()`` is the default gate (a dataset without gate.toml): a row passes only
    when its calls match the reference and no violation blocks; no floors."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = 1
    row_outcome: RowOutcomeName = "match"
    """When a row passes: ``match`` (the default) — its calls match the reference (``exact_match``: fp = 0 and
    fn = 0; argument rules and accepted plans decide what matches) and no blocking rule fires; a scored row that
    does not match fails as rule ``reference_mismatch``. ``no_blocking`` — only the blocking rules decide (for a
    dataset whose references are one right answer among several and whose rules say what must not happen). This
    is the one place the default is decided; pass@k / pass^k (``--outcome gate``) and ``tooleval compare``
    follow it."""
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    severity: dict[str, Severity] = Field(default_factory=dict)
    """Rule -> ``blocking``/``advisory``, overriding the severity recorded on the rows."""
    tool_schema: ToolSchemaGate = Field(default_factory=ToolSchemaGate)
    row_errors_block: bool = True
    """A row that could not be scored (``error`` set) fails as rule ``row_error``, and a case in scope without a
    row (or a trace that made none) as rule ``unscored``. ``false`` is an explicit opt-out (never the default);
    a run with no scored row fails whatever it says."""
    accept_name_only: bool = Field(default=False, strict=True)  # TOML true/false only: "yes" is no decision
    """A row with a call whose arguments were not captured (row column ``name_only``; the recorded rule
    ``args_not_captured``) may pass on its calls matched by name. By default (``false``) the gate grades
    ``args_not_captured`` blocking: a match by name vouches for no argument. ``true`` leaves it advisory, as
    recorded. A ``[severity]`` entry for the rule wins over both."""
    f1: F1Advisory = Field(default_factory=F1Advisory)
    slices: dict[str, Floor] = Field(default_factory=dict)
    """Case ``slice`` -> floors."""
    families: dict[str, Floor] = Field(default_factory=dict)
    """Tool family (tools.json ``family``, row column ``tool_families``) -> floors."""
    waivers: list[Waiver] = Field(default_factory=list)
    quarantine: list[QuarantineEntry] = Field(default_factory=list)
    listed_rows: int = Field(default=100, ge=0)
    """Rows listed one by one, with their evidence, per list (failing, waived, quarantined) in ``junit.xml``,
    ``summary.json``'s ``gate``, ``gate.json`` and ``tooleval gate --format json``: the worst first (no F1, then the lowest F1).
    The other rows are counted per slice and rule; the verdict and every count cover all rows."""

    @field_validator("severity")
    @classmethod
    def _known_rules(cls, value: dict[str, str]) -> dict[str, str]:
        for rule in value:
            _known_rule(rule)
        return dict(sorted(value.items()))

    @classmethod
    def from_toml(cls, text: str, path: str | Path | None = None) -> "GateConfig":
        """Parse gate.toml text.

        Raises:
            InputFileError: not TOML, nested deeper than :data:`tooleval.canonical.MAX_DEPTH`, an unknown key, or
                an invalid value (``path`` names the file).
        """
        from tooleval.canonical import MAX_DEPTH, nesting_within

        if _dotted_key_too_long(text, MAX_DEPTH):
            raise InputFileError(path, None, f"a key has more than {MAX_DEPTH} dotted parts (a.b.c…: tables "
                                 "inside each other).", "flatten that key.")
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            found = re.search(r"at line (\d+)", str(exc))
            raise InputFileError(path, int(found.group(1)) if found else None, f"not valid TOML ({exc}).",
                                 "repair the TOML syntax.") from None
        except RecursionError:  # tomllib reads nested arrays and inline tables recursively
            raise InputFileError(path, None, "nested too deeply to read (arrays or inline tables inside each "
                                 "other beyond Python's recursion limit).", "flatten that value.") from None
        if not nesting_within(data, MAX_DEPTH):  # validation and every reader after it recurse into the value
            raise InputFileError(path, None, f"nested deeper than {MAX_DEPTH} levels (arrays or tables inside each "
                                 "other).", "flatten that value.")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            errors = exc.errors()
            # a misspelt key shows twice: as an unknown key and as the real key missing; the first says why
            err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
            where = ".".join(str(p) for p in err["loc"]) or "(top level)"
            line = _line_of(text, err["loc"])
            if err["type"] == "extra_forbidden":
                problem, fix = _unknown_key(tuple(err["loc"]), line)
                raise InputFileError(path, line, problem, fix) from None
            raise InputFileError(path, line, f"{where}: {err['msg']}.", "fix that value (see docs/rules.md).") \
                from None


_KEY_PIECES = re.compile(r"[^\n=\[\]{},]+")
"""The stretches of TOML text between the characters that end a key (a line end, ``=``, brackets, braces,
commas): a dotted key, or a table header's, lies within one."""
_KEY_TEXT = re.compile(r"[\w\-.\"' \t]*")


def _dotted_key_too_long(text: str, parts: int) -> bool:
    """Whether a stretch of ``text`` that could be a dotted key (word characters, dashes, quotes, blanks and dots)
    holds more than ``parts`` parts. tomllib takes time quadratic in a key's parts (100,000 parts: minutes), so
    such a key is refused before parsing; a nesting that deep is refused after parsing anyway. Linear in the
    text: no pattern here backtracks."""
    for piece in _KEY_PIECES.finditer(text):
        found = piece.group()
        if found.count(".") >= parts and _KEY_TEXT.fullmatch(found):
            return True
    return False


def _unknown_key(loc: tuple, line: int | None) -> tuple[str, str]:
    """``(problem, fix)`` for an unknown key at ``loc``: its key path, the key and its line, the nearest key
    that table accepts (a misspelling), or where a key of another file or table belongs."""
    key, table = str(loc[-1]), _table_name(loc[:-1])
    head = f"{'.'.join(str(p) for p in loc)}: unknown key {key!r}" + (f" at line {line}" if line is not None else "")
    accepted = _keys_at(loc[:-1])
    close = difflib.get_close_matches(key, accepted, n=1, cutoff=0.6)
    if close:
        return (f"{head}; did you mean {close[0]!r}?",
                f"rename it to {close[0]!r} (docs/rules.md lists the gate.toml keys).")
    from tooleval.models import Case

    if key in Case.model_fields:
        return (f"{head}: {key!r} is a case key, not a gate.toml one.",
                f"set {key!r} on each case it applies to in cases.jsonl (docs/rules.md), and remove it here.")
    if not table and key in PolicyConfig.model_fields:
        return f"{head}: {key!r} is a [policy] key.", "move it under [policy]."
    listed = ", ".join(repr(k) for k in accepted)
    return (f"{head}.", f"remove it{f'; [{table}] accepts {listed}' if table and listed else ''} "
                        "(docs/rules.md lists the gate.toml keys).")


def _table_name(loc: tuple) -> str:
    """``waivers.0`` -> ``waivers`` (the TOML table a key path is written in)."""
    return ".".join(str(part) for part in loc if not isinstance(part, int))


def _keys_at(loc: tuple) -> list[str]:
    """The keys the table at ``loc`` (a key path into :class:`GateConfig`) accepts; ``[]`` where free-form
    (``[severity]``) or unknown."""
    model: type[BaseModel] | None = GateConfig
    mapping = False  # the last field was a dict of models: the next part is a free key
    for part in loc:
        if model is None:
            return []
        if isinstance(part, int) or mapping:
            mapping = False
            continue
        field = model.model_fields.get(str(part))
        if field is None:
            return []
        model, mapping = _inner_model(field.annotation)
    return sorted(model.model_fields) if model is not None and not mapping else []


def _inner_model(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The model a field holds, directly or in a list or a dict, and whether it is a dict's values."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    args = [a for a in get_args(annotation) if a is not type(None)]
    origin = get_origin(annotation)
    if origin is dict and len(args) == 2:
        inner, _ = _inner_model(args[1])
        return inner, inner is not None
    for arg in args:
        inner, mapping = _inner_model(arg)
        if inner is not None:
            return inner, mapping
    return None, False


def _line_of(text: str, loc: tuple) -> int | None:
    """Best-effort 1-based line of a key path in TOML text (``None`` when it cannot be found)."""
    lines = text.splitlines()
    start, table = 0, []
    for part in loc:
        if isinstance(part, int):
            header = re.compile(r"^\s*\[\[\s*" + re.escape(".".join(table)) + r"\s*\]\]")
            hits = [i for i, line in enumerate(lines) if header.match(line)]
            if part < len(hits):
                start = hits[part]
            continue
        table.append(str(part))
    if not table:
        return None
    key = re.escape(table[-1])
    pattern = re.compile(rf"^\s*(\[\[?[^\]]*\b{key}\b[^\]]*\]\]?|\"?{key}\"?\s*=)")
    for i in range(start, len(lines)):
        if pattern.match(lines[i]):
            return i + 1
    return None


def load_gate_config(path: str | Path) -> GateConfig:
    """Read a gate.toml file.

    Raises:
        InputFileError: missing, unreadable or too large a file (:func:`tooleval._bounded.read_bounded`), invalid
            TOML, nesting deeper than :data:`tooleval.canonical.MAX_DEPTH`, unknown keys, invalid values.
    """
    from tooleval._bounded import read_bounded

    file = Path(path)
    try:
        text = read_bounded(file, what="the gate config").decode("utf-8")
    except FileNotFoundError:
        raise InputFileError(file, None, "gate config not found.", "create it or pass --config FILE.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputFileError(file, None, f"cannot read the file ({exc}).", "save it as UTF-8 TOML.") from None
    return GateConfig.from_toml(text, file)


def load_policy(dataset_dir: str | Path) -> PolicyConfig:
    """The ``[policy]`` of a dataset's own ``gate.toml``; the defaults when the dataset has none.

    Raises:
        InputFileError: see :func:`load_gate_config`.
    """
    file = Path(dataset_dir) / "gate.toml"
    return load_gate_config(file).policy if file.exists() else PolicyConfig()
