"""The scoring stage's shortcuts give the values the long way gives: a case whose references redaction provably
leaves as they are is kept as it is (the others are redacted part by part, a redacted system prompt looked up
per shard), a call the shard holds is found by its canonical text without reading it, the sparse list columns are
laid out from the few rows that have values, and the provenance of the common bulk rows is decided from the
batch's columns."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tasks import cached_redactor
from tests.scoring.test_decode_once import KEY, _run_stages
from tooleval.capture.provenance import input_key
from tooleval.capture.redaction import RedactionConfig, Redactor
from tooleval.dataset import load_dataset_cached
from tooleval.models import Call, Case
from tooleval.rules import ToolTable, load_policy
from tooleval.runs.plan import plan_run
from tooleval.runs.spec import RunSpec
from tooleval.scoring import CallRegistry, ScoringSources, score_table
from tooleval.scoring import _table
from tooleval.scoring._cases import redacted_case, redacted_rules, reference_calls
from tooleval.storage import read_table_file
from tooleval.storage.stages import stage_dir
from tooleval.synth import write_synth


def _redactor(*cases: Case) -> Redactor:
    redactor = Redactor(RedactionConfig(fields=["email", "api_key"], paths=[], key_digest="x"), b"k" * 32)
    redactor.seed_cases(list(cases))
    return redactor


def _walked(case: Case, redactor: Redactor) -> Case:
    """The case with every reference redacted by the walk (what redacted_case gave for every case before)."""
    plans = [reference_calls(plan, redactor) for plan in case.plans]
    return case.model_copy(update={
        "expected_calls": plans[0],
        "argument_rules": None if case.argument_rules is None else
        {tool: redacted_rules(rules, redactor) for tool, rules in case.argument_rules.items()},
        "accepted_plans": plans[1:] if case.accepted_plans is not None else None,
        "expected_outputs": None if case.expected_outputs is None else
        [redactor.redact_reference(text) for text in case.expected_outputs],
        "input": redactor.redact_messages(case.input)})


def test_a_case_without_secrets_is_its_own_redaction():
    case = Case.model_validate({"case_id": "a", "input": [{"role": "user", "content": "book a table for 2"}],
                                "expected_calls": [{"name": "book", "args": {"seats": 2, "when": "8pm"}}],
                                "expected_outputs": ["booked"]})
    assert redacted_case(case, _redactor(case)) is case


def test_a_system_prompt_naming_a_field_is_redacted_once_and_the_user_turn_kept():
    prompt = {"role": "system", "content": "Write to the user at email: help@shop.example when stuck."}
    cases = [Case.model_validate({"case_id": str(k), "input": [prompt, {"role": "user", "content": f"order {k}"}],
                                  "expected_calls": [{"name": "mail", "args": {"email": "x@y.example", "n": k}}]})
             for k in range(2)]
    redactor = _redactor(*cases)
    parts: dict = {}
    first, second = (redacted_case(case, redactor, None, parts) for case in cases)
    for case, redacted in ((cases[0], first), (cases[1], second)):
        assert redacted == _walked(case, redactor)
        assert redacted.input[1] is case.input[1]  # the user's turn holds no secret: kept as it is
        assert redacted.expected_calls[0].args["email"] == redactor.token("x@y.example")
        assert "help@shop.example" not in redacted.input[0]["content"]
    assert second.input[0] is first.input[0] and len(parts) == 1  # the prompt was walked for the first case only


def test_listed_values_of_a_rule_are_redacted_as_the_argument_at_its_path():
    case = Case.model_validate({"case_id": "a", "input": "hi", "expected_calls": [{"name": "mail", "args": {"to": 1}}],
                                "argument_rules": {"mail": {"email": {"one_of": ["a@b.example"]}}}})
    redacted = redacted_case(case, _redactor(case))
    assert redacted.argument_rules["mail"]["email"].one_of == [_redactor(case).token("a@b.example")]


_TEXT = st.sampled_from(["", "plain", "email: a@b.example", "api_key=sk-123456", '{"email": "q@r.example"}',
                         "a@b.example", "x: 1"])
_VALUE = st.recursive(st.none() | st.booleans() | st.integers(-3, 3) | _TEXT,
                      lambda inner: st.lists(inner, max_size=3) |
                      st.dictionaries(st.sampled_from(["email", "note", "Email", "n"]), inner, max_size=3),
                      max_leaves=8)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["system", "user"]), _TEXT), min_size=1, max_size=3),
       st.lists(st.dictionaries(st.sampled_from(["email", "note", "n"]), _VALUE, max_size=3), max_size=3),
       st.none() | st.lists(_TEXT, max_size=2), st.lists(_VALUE, max_size=2))
def test_redacted_parts_are_the_walk_s(messages, args, outputs, seeds):
    case = Case.model_validate({"case_id": "c", "input": [{"role": r, "content": t} for r, t in messages],
                                "expected_calls": [{"name": "f", "args": a} for a in args],
                                "expected_outputs": outputs})
    redactor = _redactor(case)
    redactor.seed([*seeds, case.input])  # base secrets from other values too
    redacted = redacted_case(case, redactor, None, {})
    walked = _walked(case, redactor)
    assert redacted == walked
    assert [c.args_json for c in redacted.expected_calls] == [c.args_json for c in walked.expected_calls]


def test_a_call_the_shard_holds_is_found_by_its_text_without_reading_it(monkeypatch):
    registry = CallRegistry()
    held = registry.reference(Call.from_raw("get", {"id": 1}))

    def unread(name, text):
        raise AssertionError("read again")

    monkeypatch.setattr(Call, "from_canonical", unread)
    assert registry.canonical("get", '{"id":1}') == held
    monkeypatch.undo()
    # a new text: its record is its text, and ragas' Python equality (True == 1) gives the two calls one ragas key
    one, true = registry.canonical("get", '{"id":true}'), registry.canonical("get", '{"id":1.5}')
    assert registry.records[one] == {"name": "get", "args_json": '{"id":true}', "args_raw": None,
                                     "parse_error": None}
    assert registry.ragas[one] == registry.ragas[held] != registry.ragas[true]
    assert (registry.not_captured[one], registry.malformed[one]) == (False, False)
    assert registry.calls[one] == Call.from_raw("get", '{"id": true}')


def test_sparse_lists_are_laid_out_from_the_rows_that_have_values():
    a = {"rule": "r", "severity": "advisory", "tool": "t", "detail": "a"}
    b = dict(a, detail="b")
    # rows 1, 3, 5, 7 of a batch are bulk rows; row 4 had values but left the bulk rows
    column = _table._sparse({3: [a], 7: [a, b], 4: [b]}, np.array([1, 3, 5, 7]), "violations")
    assert column.to_pylist() == [[], [a], [], [a, b]]


@pytest.fixture(scope="module")
def bfcl_stage(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("prov")
    mp = pytest.MonkeyPatch()
    mp.setenv("TOOLEVAL_REDACTION_KEY", KEY)
    synth = write_synth(280, 3, "bfcl", tmp / "bfcl")
    _run_stages(synth.path, tmp / "out")
    plan = plan_run(RunSpec(dataset=str(synth.path), traces=None, out=str(tmp / "out"), run_id="x", workers=1))
    loaded = load_dataset_cached(plan.dataset.path)
    redactor = cached_redactor(plan.out, plan.redaction, plan.dataset)
    stage = sorted(Path(stage_dir(tmp / "out", "capture")).glob("*.arrow"))[0]
    yield loaded, redactor, read_table_file(str(stage))
    mp.undo()


def test_provenance_of_bulk_rows_from_columns_is_the_join_check_s(bfcl_stage, monkeypatch):
    loaded, redactor, table = bfcl_stage
    case_ids = table.column("case_id").to_pylist()
    n = len(case_ids)
    own = [input_key(loaded.cases[c].input) for c in case_ids]  # the bfcl cases hold no secret
    # rows by their position modulo 4: no request recorded (as captured); their own case's request with a response
    # id; the same without one; another case's request
    other = {k: next(c for c in case_ids if c != case_ids[k]) for k in range(3, n, 4)}
    keys = [None if k % 4 == 0 else own[k] if k % 4 < 3 else input_key(loaded.cases[other[k]].input)
            for k in range(n)]
    responses = [f"resp-{k}" if k % 4 in (1, 3) else None for k in range(n)]
    table = table.set_column(table.schema.get_field_index("request_key"), "request_key", pa.array(keys, pa.string()))
    table = table.set_column(table.schema.get_field_index("response_id"), "response_id",
                             pa.array(responses, pa.string()))

    def score() -> pa.Table:
        return score_table(table, ScoringSources(loaded.cases, redactor=redactor, tools=ToolTable(loaded.tools),
                                                 policy=load_policy(loaded.path), digests_verified=True))

    decided = []
    plain = _table._plain_provenance
    monkeypatch.setattr(_table, "_plain_provenance", lambda *a: decided.append(plain(*a)) or decided[-1])
    rows = score().to_pylist()
    assert sum(int(mask.sum()) for mask in decided[0]) > n // 2  # most rows were decided from the columns
    for k, row in enumerate(rows):
        status, detail = row["provenance_status"], row["provenance_detail"]
        if k % 4 == 0:
            assert (status, detail) == ("missing", "no generation request recorded with the trace")
        elif k % 4 == 1:
            assert (status, detail) == ("ok", "request matches the case input; response id recorded; digest verified")
        elif k % 4 == 2:
            assert (status, detail) == ("missing", "no provider response id recorded")
        else:
            assert status == "mismatch" and detail.startswith(f"the trace answers case {other[k]}'s request")
        expected_owner = "evaluation_platform" if k % 4 == 3 else None if row["exact_match"] else "agent"
        assert row["failure_owner"] == expected_owner and row["first_divergent_boundary"] is None
    monkeypatch.setattr(_table, "_plain_provenance", lambda *a: None)  # every row by the per-row check
    assert score().to_pylist() == rows
