"""The tooleval pytest plugin: a dataset's recorded rows as test items, judged by the release gate.

``pytest --tooleval-dataset DIR [--tooleval-traces FILE] [--tooleval-gate FILE]`` adds, to whatever else pytest
collects:

* one item per (case, trial) of the recorded traces, named ``<case id>[<trial>]``, whose result is the row's
  ``gate_verdict``, the column ``tooleval run`` publishes (the release gate's verdict: blocking rules after
  ``[severity]``, waivers and quarantine): ``pass`` passes, ``fail`` fails with its rules and call diff,
  ``waived`` is **xfail** (the waiver's owner, expiry and reason), ``quarantined`` is **skipped** (the
  quarantine's owner and reason);
* one item ``dataset-checks`` for what the gate checks over the whole run: no scored row, slice and family
  floors, ``min_rows``, cases without a scored row (no trace, an unreadable one), expired waivers.

So a green run (every item passed, xfailed or skipped) is a passing ``tooleval gate``, and ``-k`` selects cases.
The rows are replayed, scored and judged in-process when pytest collects (:mod:`tooleval.testing._dataset`): no
item starts Prefect, nothing is written.

The fixture ``tooleval_case`` hands a test each case of ``--tooleval-dataset`` in turn (the test is parametrized
by case id): ``.case`` (:class:`tooleval.models.Case`), ``.expected_calls`` (its reference, ``[{"name", "args"}]``),
``.plans`` (every accepted plan, the reference first), ``.input`` and ``.check(observed)`` /
``.assert_calls(observed)``, which score a trajectory of the test's own agent against the case with the dataset's
tools and policy (:func:`tooleval.testing.check_tool_calls`).

Registered through the ``pytest11`` entry point ``tooleval``; the hooks do nothing without
``--tooleval-dataset``. Imports of tooleval are deferred to the hooks that need them, so that loading the plugin
costs a pytest run nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

DATASET_ITEM = "dataset-checks"
"""The name of the item that holds the dataset-level checks."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tooleval", "tooleval: a dataset's rows judged by the release gate")
    group.addoption("--tooleval-dataset", metavar="DIR", default=None,
                    help="a tooleval dataset folder: one item per (case, trial) of its recorded traces, judged by "
                         "the release gate, plus one item for the dataset-level checks.")
    group.addoption("--tooleval-traces", metavar="FILE", default=None,
                    help="the recorded traces to judge (default: the dataset's traces.jsonl[.gz]).")
    group.addoption("--tooleval-gate", metavar="FILE", default=None,
                    help="the gate.toml to judge by (default: the dataset's own, else the default gate).")


def _printable(text: str) -> str:
    """A case id as a node name: any string is a case id; control characters are escaped so the name stays one
    line."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode() for ch in text)


class ToolevalDataset(pytest.Collector):
    """The dataset's items: a row item per (case, trial), then :data:`DATASET_ITEM`."""

    def __init__(self, *, options: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.options = options

    def collect(self) -> list[pytest.Item]:
        from tooleval.testing._dataset import judge_dataset

        judgement = judge_dataset(self.options["dataset"], self.options["traces"], self.options["gate"])
        items: list[pytest.Item] = [
            ToolevalRow.from_parent(self, name=f"{_printable(row.case_id)}[{row.trial}]", row=row, outcome=outcome)
            for row, outcome in zip(judgement.rows, judgement.outcomes)
        ]
        items.append(ToolevalDatasetChecks.from_parent(self, name=DATASET_ITEM, judgement=judgement))
        return items

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException]) -> str:
        from tooleval.errors import ToolevalError

        if isinstance(excinfo.value, ToolevalError):  # a file or usage error names the file, the line, the fix
            return f"tooleval: {excinfo.value}"
        return super().repr_failure(excinfo)


class RowFailure(Exception):
    """A row the gate fails; its text is the evidence."""


class ToolevalRow(pytest.Item):
    """One (case, trial) row, passing or failing by the gate's outcome for it."""

    def __init__(self, *, row: Any, outcome: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.row, self.outcome = row, outcome
        self.user_properties += [("case_id", row.case_id), ("trial", row.trial)]

    def runtest(self) -> None:
        outcome = self.outcome
        verdict = self.row.gate_verdict  # the row's one verdict, as a run stores it: pass, fail, waived, quarantined
        if verdict == "quarantined":
            q = outcome.quarantine
            pytest.skip(f"quarantined by {q['owner']}: {q['reason']}")
        if verdict == "fail":
            raise RowFailure(self._evidence())
        if verdict == "waived":
            pytest.xfail("; ".join(f"{', '.join(outcome.waived_rules)} waived by {w['owner']} until {w['expires']}: "
                                   f"{w['reason']}" for w in outcome.waivers))

    def _evidence(self) -> str:
        from tooleval.testing._explain import explain

        outcome = self.outcome
        blocking = [v for v in outcome.violations if v["severity"] == "blocking" and v["rule"] in outcome.rules]
        head = f"case {self.row.case_id!r} trial {self.row.trial} fails the gate: {', '.join(outcome.rules)}"
        return "\n".join([head, explain(self.row, self.row.match_mode or "unordered", blocking)])

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, RowFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"case {self.row.case_id!r} trial {self.row.trial}"


class DatasetFailure(Exception):
    """The dataset-level checks the gate fails; its text lists them."""


class ToolevalDatasetChecks(pytest.Item):
    """What the gate checks over the whole run (see the module docstring)."""

    def __init__(self, *, judgement: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.judgement = judgement

    def runtest(self) -> None:
        failures = self.judgement.dataset_failures()
        if failures:
            raise DatasetFailure("the gate fails the dataset:\n" + "\n".join(f"  - {f}" for f in failures))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, DatasetFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"dataset {self.judgement.dataset.revision}: gate-level checks"


def _options(config: pytest.Config) -> dict[str, Any] | None:
    dataset = config.getoption("tooleval_dataset")
    if dataset is None:
        return None
    return {"dataset": dataset, "traces": config.getoption("tooleval_traces"),
            "gate": config.getoption("tooleval_gate")}


@pytest.hookimpl(tryfirst=True)  # before ``-k`` and ``-m`` deselect: they select among these items too
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    options = _options(config)
    if options is None:
        return
    path = Path(options["dataset"]).resolve()
    try:  # named like a test file: by its path under the rootdir, else by its folder's name
        nodeid = path.relative_to(config.rootpath).as_posix()
    except ValueError:
        nodeid = path.name
    collector = ToolevalDataset.from_parent(session, name=path.name, path=path, nodeid=nodeid, options=options)
    items.extend(session.genitems(collector))


@dataclass(frozen=True)
class ToolevalCase:
    """One case of ``--tooleval-dataset``, as the fixture ``tooleval_case`` hands it to a test."""

    case: Any
    """The :class:`tooleval.models.Case`."""
    dataset: Any
    """The loaded :class:`tooleval.dataset.Dataset` (its tools and gate.toml ``[policy]`` apply to checks)."""

    @property
    def case_id(self) -> str:
        return self.case.case_id

    @property
    def input(self) -> Any:
        """The case's input: chat messages or text."""
        return self.case.input

    @property
    def expected_calls(self) -> list[dict[str, Any]]:
        """The reference calls, ``[{"name", "args"}]``."""
        return [{"name": call.name, "args": call.args} for call in self.case.expected_calls]

    @property
    def plans(self) -> list[list[dict[str, Any]]]:
        """Every accepted reference plan, ``expected_calls`` first."""
        return [[{"name": call.name, "args": call.args} for call in plan] for plan in self.case.plans]

    def check(self, observed: Any, **options: Any) -> Any:
        """:func:`tooleval.testing.check_tool_calls` of ``observed`` against this case, with the dataset's tools
        and policy (``options`` as there: ``mode``, ``redaction_key``...)."""
        from tooleval.testing import check_tool_calls

        return check_tool_calls(observed, self.case, dataset=self.dataset, **options)

    def assert_calls(self, observed: Any, **options: Any) -> Any:
        """:func:`tooleval.testing.assert_tool_calls` of ``observed`` against this case (see :meth:`check`)."""
        from tooleval.testing import assert_tool_calls

        __tracebackhide__ = True
        return assert_tool_calls(observed, self.case, dataset=self.dataset, **options)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "tooleval_case" not in metafunc.fixturenames:
        return
    options = _options(metafunc.config)
    if options is None:
        return  # the fixture itself skips the test
    from tooleval.dataset import load_dataset_cached

    loaded = load_dataset_cached(options["dataset"])
    cases = [ToolevalCase(case, loaded) for case in loaded.cases.values()]
    metafunc.parametrize("tooleval_case", cases, ids=[_printable(c.case_id) for c in cases])


@pytest.fixture
def tooleval_case() -> ToolevalCase:
    """Each case of ``--tooleval-dataset`` in turn (the test is parametrized by case id); see
    :class:`ToolevalCase`. Without ``--tooleval-dataset`` the test is skipped."""
    pytest.skip("tooleval_case needs --tooleval-dataset DIR")
