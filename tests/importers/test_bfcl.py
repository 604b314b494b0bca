"""BFCL importer on the shared data: every possible-answer file imports, and hand-written result lines get the
verdict BFCL's documented checker rules give (``bfcl_eval/eval_checker/ast_eval/ast_checker.py``: acceptable
values per parameter, ``""`` = may be omitted, no unexpected parameter, order-free parallel calls, strings
standardised, irrelevance = no call, an undecodable output is wrong, a text answer makes no call)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.paths import SHARED_DATA
from tests.support.importers import read_jsonl, score, write_lines
from tooleval.importers import import_bfcl
from tooleval.importers._bfcl_answers import parse_call_string

BFCL = SHARED_DATA / "bfcl"


def _source_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("bfcl")
    return out, import_bfcl(BFCL, out)


def test_every_category_imports_with_its_questions_and_answers(imported) -> None:
    out, report = imported
    assert report.skipped_total == 0
    for question_file in sorted(BFCL.glob("BFCL_v4_*.json")):
        category = question_file.stem.removeprefix("BFCL_v4_")
        questions = _source_lines(question_file)
        cases = read_jsonl(out / category / "cases.jsonl")
        answers = BFCL / "possible_answer" / question_file.name
        if "multi_turn" in category:
            truth = [a["ground_truth"] for a in _source_lines(answers)]
            assert len(cases) == sum(len(turns) for turns in truth)  # one case per (conversation, turn)
            assert sum(len(c["expected_calls"]) for c in cases) == sum(len(t) for turns in truth for t in turns)
        elif "irrelevance" in category:
            assert not answers.exists() and len(cases) == len(questions)
            assert all(c["expected_calls"] == [] for c in cases)
        else:
            truth = _source_lines(answers)
            assert [c["case_id"] for c in cases] == [q["id"] for q in questions] == [a["id"] for a in truth]
            assert [len(c["expected_calls"]) for c in cases] == [len(a["ground_truth"]) for a in truth]
    assert len(report.datasets) == 11


def test_multi_turn_turns_are_cases_with_parsed_calls(imported) -> None:
    out, _ = imported
    cases = {c["case_id"]: c for c in read_jsonl(out / "multi_turn_base" / "cases.jsonl")}
    # Ground truth of multi_turn_base_0, turn 2: ["sort('final_report.pdf')"] (a positional argument).
    assert cases["multi_turn_base_0/turn-2"]["expected_calls"] == [{"name": "sort",
                                                                     "args": {"file_name": "final_report.pdf"}}]
    assert cases["multi_turn_base_0/turn-0"]["metadata"]["conversation_id"] == "multi_turn_base_0"
    assert cases["multi_turn_base_0/turn-0"]["input"][0]["content"].startswith("Move 'final_report.pdf'")


def test_call_strings_are_parsed_never_evaluated() -> None:
    with pytest.raises(ValueError):
        parse_call_string("rm(path=__import__('os').getcwd())", {})
    assert parse_call_string("mv(source='a', destination=\"b\")", {}) == {
        "name": "mv", "args": {"source": "a", "destination": "b"}}


def test_tools_json_is_json_schema(imported) -> None:
    out, _ = imported
    tools = {t["name"]: t for t in json.loads((out / "simple_python" / "tools.json").read_text())}
    # BFCL writes {"type": "dict"} and "float"; names with "." as function-calling models see them.
    assert tools["math_hypot"]["original_name"] == "math.hypot"
    dotted = [t for t in tools.values() if "original_name" in t]
    assert len(dotted) > 100 and all(t["name"] == t["original_name"].replace(".", "_") for t in dotted)
    assert tools["math_hypot"]["parameters"]["type"] == "object"
    text = json.dumps(list(tools.values()))
    assert '"type": "dict"' not in text and '"type": "float"' not in text


def _result(name: str, args) -> dict:
    return {name: args if isinstance(args, str) else json.dumps(args)}


VERDICTS = [
    # (category, question id, result, BFCL's verdict, what the rule is)
    ("simple_python", "simple_python_0", [_result("calculate_triangle_area", {"base": 10, "height": 5, "unit": "units"})],
     True, "correct"),
    ("simple_python", "simple_python_3", [_result("algebra_quadratic_roots", {"a": 1, "b": 3, "c": 2})],
     False, "wrong value"),
    ("simple_python", "simple_python_7", [_result("calculate_circumference", {"radius": 4, "unit": "in"})],
     True, "alternative value"),
    ("simple_python", "simple_python_15", [_result("integrate", {"function": "lambda x: x**3", "start_x": -2,
                                                                  "end_x": 3, "method": "simpson"})],
     True, "alternative value of a string"),
    ("simple_python", "simple_python_2", [_result("math_hypot", {"x": 4, "y": 5})], True, "omitted optional"),
    ("simple_python", "simple_python_4", [_result("solve_quadratic_equation", {"a": 2, "b": 6, "c": 5, "d": 1})],
     False, "extra parameter"),
    ("simple_python", "simple_python_1", [{"math_factorial": '{"number": 5'}], False, "malformed argument string"),
    ("simple_python", "simple_python_5", "The roots are 4 and -1/3.", False, "text answer"),
    ("simple_python", "simple_python_6", [_result("solve_quadratic", {"a": 2, "b": 5, "c": 3, "d": 0}),
                                          _result("solve_quadratic", {"a": 2, "b": 5, "c": 3})],
     False, "an extra call"),
    ("simple_python", "simple_python_8", [_result("geometry_area_circle", {"radius": 10, "units": "METERS"})],
     True, "string standardised (case)"),
    ("parallel", "parallel_0", [_result("spotify_play", {"artist": "Maroon 5", "duration": 15}),
                                _result("spotify_play", {"artist": "Taylor Swift", "duration": 20})],
     True, "parallel calls in another order"),
    ("parallel", "parallel_0", [_result("spotify_play", {"artist": "Maroon 5", "duration": 20}),
                                _result("spotify_play", {"artist": "Taylor Swift", "duration": 15})],
     False, "parallel calls with values swapped"),
    ("irrelevance", "irrelevance_0", "I cannot compute that with the tools I have.", True, "irrelevance, no call"),
    ("irrelevance", "irrelevance_0", [_result("determine_body_mass_index", {"weight": 10, "height": 5})],
     False, "irrelevance with a call"),
    ("irrelevance", "irrelevance_1", [], True, "irrelevance, empty call list"),
    # acceptable values belong to one reference call: three identical calls cannot satisfy three references
    ("parallel", "parallel_3", [_result("protein_info.get_sequence_and_3D", {"protein_name": "HbA1c"})] * 3,
     False, "three identical parallel calls"),
    ("parallel", "parallel_3", [_result("protein_info_get_sequence_and_3D", {"protein_name": n, "model_3d": True})
                                for n in ("rat hemoglobin", "HbA1c", "normal hemoglobin")],
     True, "parallel calls each with its own acceptable value"),
    # parallel_178's first possible answer accepts Microsoft or Apple on 2022-01-01, its third only Apple on that
    # date: BFCL pairs each answer in turn with the first call it accepts, so Apple's call made first is taken by
    # the first answer and the third answer finds none (the same four calls pass in the answers' order)
    ("parallel", "parallel_178", [_result("get_stock_price", {"company_name": c, "date": d, "exchange": "NASDAQ"})
                                  for c, d in (("Microsoft", "2022-01-01"), ("Microsoft", "2022-02-01"),
                                               ("Apple", "2022-01-01"), ("Apple", "2022-02-01"))],
     True, "parallel calls in the possible answers' order"),
    ("parallel", "parallel_178", [_result("get_stock_price", {"company_name": c, "date": d, "exchange": "NASDAQ"})
                                  for c, d in (("Apple", "2022-01-01"), ("Microsoft", "2022-01-01"),
                                               ("Microsoft", "2022-02-01"), ("Apple", "2022-02-01"))],
     False, "a call two possible answers accept, made first: first-fit pairing"),
    ("simple_python", "simple_python_0", [_result("calculate_triangle_area", {"base": 10, "height": 5, "unit": ""})],
     True, "explicit empty string where it is listed"),
    ("simple_python", "simple_python_25", [_result("calculate_final_velocity", {"height": 150, "gravity": ""})],
     False, "explicit empty string for a float"),
    ("live_simple", "live_simple_116-72-0", [{"sum_numbers": '{"numbers_list": [133, 34]}'}],
     False, "ints inside an array of float (type_error:nested)"),
    ("live_simple", "live_simple_116-72-0", [{"sum_numbers": '{"numbers_list": [133.0, 34.0]}'}],
     True, "floats inside an array of float"),
    ("simple_python", "simple_python_25", [{"calculate_final_velocity": '{"height": 150, "gravity": 9.81}'}],
     True, "a float where a float is expected"),
    ("simple_python", "simple_python_1", [_result("math.factorial", {"number": 5})], True, "dotted function name"),
    # the possible answer contradicts the function doc: BFCL's checker fails every answer
    ("live_simple", "live_simple_112-68-0", [{"record": '{"outofscope": ["what is the weather like"]}'}],
     False, "the doc requires a parameter the answer never lists"),
    ("live_multiple", "live_multiple_964-207-0",
     [{"transfer_to_human_agent": '{"question": "Can you tell me what is the minimum package arrival time?"}'}],
     False, "the answer names a parameter the doc does not declare, and the doc's is missing"),
    ("live_multiple", "live_multiple_862-181-3",
     [_result("Trains_1_FindTrains", {"_from": "New York, NY", "to": "Los Angeles, CA", "date_of_journey": "05/15/2023",
                                      "journey_start_time": "09:00"})],
     False, "the answer lists a parameter the doc does not declare"),
    ("live_multiple", "live_multiple_862-181-3",
     [_result("Trains_1_FindTrains", {"_from": "New York, NY", "to": "Los Angeles, CA", "date_of_journey": "05/15/2023"})],
     False, "leaving out the parameter the doc does not declare"),
]


def gate_passes(row: dict) -> bool:
    """The default release gate's verdict on one row (a dataset without gate.toml: the row's calls match under
    its case's match mode and no blocking rule fires)."""
    from datetime import date

    from tooleval.rules import GateConfig, GateTally

    return not GateTally(GateConfig(), today=date(2026, 1, 1)).add(row).rules


@pytest.fixture(scope="module")
def verdict_rows(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, int], dict]:
    """Every VERDICTS line imported through a BFCL result file (one per category, one line per question) and
    scored; keyed by (category, index in VERDICTS)."""
    root = tmp_path_factory.mktemp("bfcl-results")
    rows = {}
    for index, (category, qid, result, _, _) in enumerate(VERDICTS):
        data = root / f"data-{index}"
        (data / "possible_answer").mkdir(parents=True)
        name = f"BFCL_v4_{category}.json"
        question = next(q for q in _source_lines(BFCL / name) if q["id"] == qid)
        write_lines(data / name, [question])
        if (BFCL / "possible_answer" / name).exists():
            answer = next(a for a in _source_lines(BFCL / "possible_answer" / name) if a["id"] == qid)
            write_lines(data / "possible_answer" / name, [answer])
        model = data / "result" / "my-model"
        model.mkdir(parents=True)
        write_lines(model / f"BFCL_v4_{category}_result.json", [{"id": qid, "result": result}])
        report = import_bfcl(data / name, root / f"out-{index}", results=[data / "result"])
        assert report.skipped_total == 0 and report.converted == 2
        (row,) = score(report.datasets[0], report.datasets[0] / "traces" / "my-model.jsonl.gz")
        rows[index] = row
    return rows


@pytest.mark.parametrize("index", range(len(VERDICTS)), ids=[v[4] for v in VERDICTS])
def test_verdicts_follow_bfcls_rules(verdict_rows, index: int) -> None:
    category, qid, result, correct, _ = VERDICTS[index]
    row = verdict_rows[index]
    assert row["case_id"] == qid
    assert gate_passes(row) is correct
    if isinstance(result, str) or result == []:
        assert row["observed_calls"] in ([], None)
    if VERDICTS[index][4] == "malformed argument string":
        assert row["malformed_calls"] == 1 and row["observed_calls"][0]["args_raw"] == '{"number": 5'


def test_multi_turn_results_give_one_trace_per_turn(tmp_path: Path) -> None:
    name = "BFCL_v4_multi_turn_base.json"
    (tmp_path / "possible_answer").mkdir()
    write_lines(tmp_path / name, _source_lines(BFCL / name)[:1])
    write_lines(tmp_path / "possible_answer" / name, _source_lines(BFCL / "possible_answer" / name)[:1])
    (tmp_path / "multi_turn_func_doc").symlink_to(BFCL / "multi_turn_func_doc")
    step = [_result("cd", {"folder": "document"}), _result("mkdir", {"dir_name": "temp"})]
    turns = [[step, [_result("mv", {"source": "final_report.pdf", "destination": "temp"})], "Done."],
             [[_result("cd", {"folder": "temp"})]], [], []]
    results = write_lines(tmp_path / "BFCL_v4_multi_turn_base_result.json", [{"id": "multi_turn_base_0", "result": turns}])
    report = import_bfcl(tmp_path / name, tmp_path / "out", results=[results], agent="m")
    rows = {r["case_id"]: r for r in score(tmp_path / "out", tmp_path / "out" / "traces" / "m.jsonl.gz")}
    assert len(rows) == 4 and report.calls == 4
    assert rows["multi_turn_base_0/turn-0"]["exact_match"] is True  # cd, mkdir, mv over three steps
    assert (rows["multi_turn_base_0/turn-1"]["tp"], rows["multi_turn_base_0/turn-1"]["fn"]) == (1, 1)  # no grep


def test_schema_findings_on_the_hand_written_results(verdict_rows) -> None:
    """Issue 13 item 6 on BFCL: the hand-written calls checked against each question's own function docs."""
    from collections import Counter

    from tooleval.importers._bfcl_answers import tool_spec
    from tooleval.models import Call, ToolSpec
    from tooleval.rules._schema import schema_findings

    found = Counter()
    for index, (category, qid, _, _, _) in enumerate(VERDICTS):
        question = next(q for q in _source_lines(BFCL / f"BFCL_v4_{category}.json") if q["id"] == qid)
        tools = {spec["name"]: ToolSpec.model_validate(spec) for spec in map(tool_spec, question["function"])}
        calls = [Call.from_record(c) for c in verdict_rows[index]["observed_calls"] or []]
        found.update(f"{qid}:{f.kind}:{f.path}" for f in schema_findings(calls, tools))
    # By hand: the only departures from the docs are the extra parameter "d" of simple_python_4 and of the first
    # call of simple_python_6; the malformed call (simple_python_1) is not checked; irrelevance_0's call of
    # determine_body_mass_index is declared, with numbers where floats are expected; simple_python_25 is given ""
    # for a float. The three questions whose possible answer contradicts the doc: live_simple_112-68-0's call gives
    # one of the six parameters its doc requires; live_multiple_964-207-0's gives "question" where the doc
    # requires "statement"; the first live_multiple_862-181-3 call gives "journey_start_time", which the doc of
    # Trains_1_FindTrains does not declare (the second leaves it out and gives the three required ones).
    missing = ["acc_routing_start", "atm_finder_start", "faq_link_accounts_start", "get_balance_start",
               "get_transactions_start"]
    assert found == {"simple_python_4:unknown_parameter:d": 1, "simple_python_6:unknown_parameter:d": 1,
                     "simple_python_25:wrong_type:gravity": 1,
                     **{f"live_simple_112-68-0:missing_required:{name}": 1 for name in missing},
                     "live_multiple_964-207-0:missing_required:statement": 1,
                     "live_multiple_964-207-0:unknown_parameter:question": 1,
                     "live_multiple_862-181-3:unknown_parameter:journey_start_time": 1}
    # the scored rows carry the same findings (checked against the imported tools.json while scoring)
    stored = Counter(f"{row['case_id']}:{f['kind']}:{f['path']}" for row in verdict_rows.values()
                     for f in row["schema_findings"] or [])
    assert stored == found


def test_unreadable_answers_are_skipped_with_their_reason(tmp_path: Path) -> None:
    name = "BFCL_v4_simple_python.json"
    (tmp_path / "possible_answer").mkdir()
    write_lines(tmp_path / name, _source_lines(BFCL / name)[:3])
    answers = _source_lines(BFCL / "possible_answer" / name)[:3]
    answers[1]["ground_truth"] = ["calculate(x=1)"]  # not {func: {param: [values]}}
    write_lines(tmp_path / "possible_answer" / name, answers[:2])  # the third question has no answer
    report = import_bfcl(tmp_path / name, tmp_path / "out")
    assert (report.read, report.converted) == (3, 1)
    assert report.skipped == {"possible answer is not [{func: {param: [values]}}]": 1, "no possible answer": 1}
    assert report.examples["no possible answer"] == [f"{name}:3"]


def test_an_int_for_a_top_level_float_and_a_float_for_an_integer(tmp_path: Path) -> None:
    """BFCL converts an int given for a ``float`` parameter; a float given for an ``integer`` one is a type error."""
    from tooleval.importers._bfcl_answers import answer_calls

    docs = [{"name": "f", "parameters": {"type": "dict", "required": ["n", "x"],
                                         "properties": {"n": {"type": "integer"}, "x": {"type": "float"}}}}]
    calls, _, _ = answer_calls([{"f": {"n": [3], "x": [2.0]}}], docs)
    assert calls[0]["argument_rules"]["n"]["number_type"] == "integer" and "x" not in calls[0]["argument_rules"]


def _one_result(tmp_path: Path, category: str, qid: str, result, *, layout: str) -> tuple:
    data = tmp_path / "data"
    (data / "possible_answer").mkdir(parents=True, exist_ok=True)
    name = f"BFCL_v4_{category}.json"
    write_lines(data / name, [q for q in _source_lines(BFCL / name) if q["id"] == qid])
    if (BFCL / "possible_answer" / name).exists():
        write_lines(data / "possible_answer" / name,
                    [a for a in _source_lines(BFCL / "possible_answer" / name) if a["id"] == qid])
    folder = data / "result" / layout
    folder.mkdir(parents=True)
    write_lines(folder / f"BFCL_v4_{category}_result.json", [{"id": qid, "result": result}])
    report = import_bfcl(data / name, tmp_path / "out", results=[data / "result"])
    return report, tmp_path / "out"


def test_the_model_is_the_agent_in_bfcl_v4s_result_layout(tmp_path: Path) -> None:
    """BFCL v4 writes ``result/<model>/<group>/``: the trace's agent is the model, not ``non_live``."""
    report, out = _one_result(tmp_path, "simple_python", "simple_python_1",
                              [_result("math_factorial", {"number": 5})], layout="gpt-4o-2024-11-20-FC/non_live")
    (row,) = score(out, out / "traces" / "gpt-4o-2024-11-20-FC.jsonl.gz")
    assert row["agent_name"] == "gpt-4o-2024-11-20-FC" and row["exact_match"] is True


def test_an_inference_error_is_a_failing_row_with_the_error(tmp_path: Path) -> None:
    report, out = _one_result(tmp_path, "simple_python", "simple_python_1",
                              "Error during inference: Request timed out.", layout="m/non_live")
    assert report.skipped_total == 0 and report.converted == 2
    assert any("1 results are inference errors" in note for note in report.notes)
    (row,) = score(out, out / "traces" / "m.jsonl.gz")
    assert row["error_kind"] == "generation_error"
    assert row["error_message"] == "recorded: Error during inference: Request timed out."
    assert row["f1"] is None and row["exact_match"] is None


def test_a_multi_turn_inference_error_fails_every_turn(tmp_path: Path) -> None:
    name = "BFCL_v4_multi_turn_base.json"
    (tmp_path / "possible_answer").mkdir()
    write_lines(tmp_path / name, _source_lines(BFCL / name)[:1])
    write_lines(tmp_path / "possible_answer" / name, _source_lines(BFCL / "possible_answer" / name)[:1])
    (tmp_path / "multi_turn_func_doc").symlink_to(BFCL / "multi_turn_func_doc")
    results = write_lines(tmp_path / "BFCL_v4_multi_turn_base_result.json",
                          [{"id": "multi_turn_base_0", "result": "Error during inference: 500"}])
    import_bfcl(tmp_path / name, tmp_path / "out", results=[results], agent="m")
    rows = score(tmp_path / "out", tmp_path / "out" / "traces" / "m.jsonl.gz")
    assert len(rows) == 4 and {r["error_kind"] for r in rows} == {"generation_error"}


def test_the_schema_check_reads_the_questions_own_docs(imported) -> None:
    """A name BFCL documents differently across questions is not in tools.json; each case carries its own docs
    as tool specs, so a correct call to such a tool is not an undeclared tool."""
    out, report = imported
    cases = read_jsonl(out / "simple_python" / "cases.jsonl")
    tools = {t["name"] for t in json.loads((out / "simple_python" / "tools.json").read_text())}
    clashing = [c for c in cases if any(spec["name"] not in tools for spec in c["tools"])]
    assert clashing, "the shared data documents some names differently across questions"
    case = clashing[0]
    call = case["expected_calls"][0]
    from tooleval.models import Call, Case, ToolSpec
    from tooleval.rules import evaluate_row

    loaded = Case.model_validate(case)
    observed = [Call.from_raw(call["name"], call["args"])]
    specs = {t["name"]: ToolSpec.model_validate(t) for t in json.loads((out / "simple_python" / "tools.json").read_text())}
    result = evaluate_row(loaded, specs, None, observed)
    assert result.schema_findings == [] and result.match.exact_match


def _truth_turns(qid: str) -> list[list[dict]]:
    """The ground truth of a multi_turn_base conversation, turn by turn, as calls ``{name, args}``."""
    from tooleval.importers._bfcl import MULTI_TURN_DOCS

    name = "BFCL_v4_multi_turn_base.json"
    question = next(q for q in _source_lines(BFCL / name) if q["id"] == qid)
    truth = next(a for a in _source_lines(BFCL / "possible_answer" / name) if a["id"] == qid)["ground_truth"]
    docs = {d["name"]: d for cls in question["involved_classes"]
            for d in _source_lines(BFCL / "multi_turn_func_doc" / MULTI_TURN_DOCS[cls])}
    return [[parse_call_string(text, docs) for text in turn] for turn in truth]


def _steps(calls: list[dict]) -> list[list[dict]]:
    """One turn of a multi-turn result: its calls in one step (a turn without calls: no step)."""
    return [[_result(c["name"], c["args"]) for c in calls]] if calls else []


def _multi_turn_result(qid: str, *, empty_turns: dict[int, list[dict]] | None = None,
                       turns: int | None = None) -> list:
    truth = _truth_turns(qid)
    made = [_steps((empty_turns or {}).get(n, calls) if not calls else calls) for n, calls in enumerate(truth)]
    return made[:turns]


# multi_turn_base_180's turns 3 and 4 and multi_turn_base_167's turn 4 have an empty ground truth (an invoice of a
# cancelled booking, a call to customer support): the only such turns in the shared data
_INVOICE = {"name": "retrieve_invoice", "args": {"access_token": "abc123xyz", "booking_id": "3426812"}}
_SUPPORT = {"name": "contact_customer_support", "args": {"booking_id": "3426812", "message": "Invoice discrepancy"}}

MULTI_TURN_VERDICTS = [
    # (question id, result, BFCL's verdict on the conversation, what the rule is)
    ("multi_turn_base_180", _multi_turn_result("multi_turn_base_180"), True, "correct"),
    ("multi_turn_base_180", _multi_turn_result("multi_turn_base_180", empty_turns={3: [_INVOICE], 4: [_SUPPORT]}),
     True, "calls in the turns whose ground truth is empty"),
    ("multi_turn_base_167", _multi_turn_result("multi_turn_base_167", empty_turns={
        4: [{**_INVOICE, "args": {"access_token": "abc123xyz456", "booking_id": "3426812"}}]}),
     True, "a call in the last turn, whose ground truth is empty"),
    ("multi_turn_base_180", _multi_turn_result("multi_turn_base_180", turns=4), False,
     "ended early: fewer turns than the question (force-terminated)"),
    ("multi_turn_base_167", _multi_turn_result("multi_turn_base_167", turns=4), False,
     "ended early before the turn whose ground truth is empty"),
]


def _conversation_passes(tmp_path: Path, qid: str, result: list) -> tuple[bool, list[dict], object]:
    """tooleval's verdict on a multi-turn result line: every turn case of the conversation has a row, and the
    default gate passes each (with the rows and the import report)."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "multi_turn_func_doc").symlink_to(BFCL / "multi_turn_func_doc")
    report, out = _one_result(tmp_path, "multi_turn_base", qid, result, layout="m")
    assert report.skipped_total == 0
    cases = read_jsonl(out / "cases.jsonl")
    rows = score(out, out / "traces" / "m.jsonl.gz")
    covered = sorted(r["case_id"] for r in rows) == sorted(c["case_id"] for c in cases)
    return covered and all(gate_passes(r) for r in rows), rows, report


@pytest.mark.parametrize("index", range(len(MULTI_TURN_VERDICTS)), ids=[v[3] for v in MULTI_TURN_VERDICTS])
def test_multi_turn_verdicts_follow_bfcls_runner(tmp_path: Path, index: int) -> None:
    """BFCL's runner (``eval_runner._evaluate_single_multi_turn_entry`` and ``multi_turn_checker``, the same at
    the data's commit and at the head of gorilla) skips a turn whose ground truth is empty, whatever the model
    calls there, and fails a conversation whose result has fewer turns than its question."""
    qid, result, correct, _ = MULTI_TURN_VERDICTS[index]
    passes, _, _ = _conversation_passes(tmp_path, qid, result)
    assert passes is correct


def test_a_result_that_ended_early_is_named_and_its_missing_turns_fail(tmp_path: Path) -> None:
    result = _multi_turn_result("multi_turn_base_180", turns=4)
    passes, rows, report = _conversation_passes(tmp_path, "multi_turn_base_180", result)
    assert not passes and len(rows) == 6
    by_turn = {r["case_id"]: r for r in rows}
    for turn in (4, 5):
        row = by_turn[f"multi_turn_base_180/turn-{turn}"]
        assert row["error_kind"] == "generation_error"
        assert row["error_message"].startswith("recorded: ended early: the result has 4 of the question's 6 turns")
    assert all(by_turn[f"multi_turn_base_180/turn-{t}"]["error_kind"] is None for t in range(4))
    assert [n for n in report.notes if "ended early" in n] == [
        "multi_turn_base: 1 results ended early (fewer turns than their question: multi_turn_base_180 (4 of 6 "
        "turns)); each missing turn is a row that fails with generation_error, and BFCL fails the whole "
        "conversation (force-terminated)."]


def test_multi_turn_turn_cases_carry_bfcls_per_turn_rule(imported) -> None:
    out, _ = imported
    cases = {c["case_id"]: c for c in read_jsonl(out / "multi_turn_base" / "cases.jsonl")}
    # multi_turn_base_0 turn 0: cd, mkdir, mv (state changes in order); turn 2: sort (one read)
    assert (cases["multi_turn_base_0/turn-0"]["match_mode"], cases["multi_turn_base_0/turn-0"]["ordered"]) == (
        "superset", True)
    assert cases["multi_turn_base_0/turn-2"]["match_mode"] == "superset"
    assert "ordered" not in cases["multi_turn_base_0/turn-2"]
    empty = [c for c in cases.values() if not c["expected_calls"]]
    # an empty ground truth: BFCL's runner skips the turn, so any calls pass
    assert sorted(c["case_id"] for c in empty) == ["multi_turn_base_167/turn-4", "multi_turn_base_180/turn-3",
                                                   "multi_turn_base_180/turn-4"]
    assert all(c["match_mode"] == "superset" and "ordered" not in c for c in empty)
    assert all(c["metadata"]["not_checked"].startswith("end state:") for c in cases.values())


def test_multi_turn_extra_reads_pass_and_order_counts_where_state_changes(tmp_path: Path) -> None:
    """BFCL passes a turn whose ground-truth calls are among the model's (an extra read is allowed); a turn that
    changes state must keep the reference's order."""
    name = "BFCL_v4_multi_turn_base.json"
    (tmp_path / "possible_answer").mkdir()
    write_lines(tmp_path / name, _source_lines(BFCL / name)[:1])
    write_lines(tmp_path / "possible_answer" / name, _source_lines(BFCL / "possible_answer" / name)[:1])
    (tmp_path / "multi_turn_func_doc").symlink_to(BFCL / "multi_turn_func_doc")
    turn0 = [_result("cd", {"folder": "document"}), _result("mkdir", {"dir_name": "temp"}),
             _result("mv", {"source": "final_report.pdf", "destination": "temp"})]
    turns = [[[*turn0, _result("pwd", {})]],  # an extra read
             [[_result("grep", {"file_name": "final_report.pdf", "pattern": "budget analysis"}),
               _result("cd", {"folder": "temp"})]],  # the reference's calls, the state change after the read
             [[_result("ls", {}), _result("sort", {"file_name": "final_report.pdf"})]],  # the reference and a read
             [[_result("mkdir", {"dir_name": "temp"}), _result("cd", {"folder": "document"})]]]
    results = write_lines(tmp_path / "BFCL_v4_multi_turn_base_result.json", [{"id": "multi_turn_base_0", "result": turns}])
    import_bfcl(tmp_path / name, tmp_path / "out", results=[results], agent="m")
    rows = {r["case_id"]: r for r in score(tmp_path / "out", tmp_path / "out" / "traces" / "m.jsonl.gz")}
    assert rows["multi_turn_base_0/turn-0"]["calls_match"] is True
    assert rows["multi_turn_base_0/turn-1"]["calls_match"] is False
    assert rows["multi_turn_base_0/turn-2"]["calls_match"] is True


@pytest.mark.parametrize("api_key, passes", [("", True), ("YOUR_API_KEY_HERE", True), (None, True),
                                             ("sk-123", False)])
def test_listed_values_of_a_redacted_field_pass_alike_with_redaction(tmp_path: Path, api_key, passes) -> None:
    """live_multiple_13-4-5 lists ``""`` and ``"YOUR_API_KEY_HERE"`` for ``api_key``, a field ``tooleval run``
    redacts by default: the listed values are redacted like the agent's value, so each passes (and another value
    fails) with redaction as without it (BFCL passes the first three, fails the last)."""
    from tooleval.testing import check_tool_calls

    args = {"location": "Santa Cruz, USA", "units": "imperial"}
    if api_key is not None:
        args["api_key"] = api_key
    _, out = _one_result(tmp_path, "live_multiple", "live_multiple_13-4-5",
                         [_result("OpenWeatherMap_get_current_weather", args)], layout="m")
    (trace,) = read_jsonl(out / "traces" / "m.jsonl.gz")
    plain = check_tool_calls(trace, dataset=out)
    redacted = check_tool_calls(trace, dataset=out, redaction_key="bfcl-redaction-test-key-0001")
    assert (plain.passed, redacted.passed) == (passes, passes)
    # the agent's value was redacted (the check above would pass trivially if nothing were)
    assert ("redacted:" in json.dumps(redacted.row.observed_calls)) is (api_key is not None)


@pytest.mark.slow  # the Prefect test harness's server
@pytest.mark.usefixtures("prefect_harness")
def test_models_as_trials_are_covered_per_case_and_trial(tmp_path: Path) -> None:
    """Two models' result files of one category, their traces one traces file (model ``i`` as trial ``i``): the
    second model's file stops before the second conversation (BFCL writes a result file line by line), so its
    turns are unscored for that model although the first model answered them."""
    import gzip

    from typer.testing import CliRunner

    from tooleval.cli import app

    name = "BFCL_v4_multi_turn_base.json"
    data = tmp_path / "data"
    (data / "possible_answer").mkdir(parents=True)
    (data / "multi_turn_func_doc").symlink_to(BFCL / "multi_turn_func_doc")
    ids = ["multi_turn_base_167", "multi_turn_base_180"]
    write_lines(data / name, [q for q in _source_lines(BFCL / name) if q["id"] in ids])
    write_lines(data / "possible_answer" / name,
                [a for a in _source_lines(BFCL / "possible_answer" / name) if a["id"] in ids])
    for model, answered in (("model-a", ids), ("model-b", ids[:1])):
        (data / "result" / model).mkdir(parents=True)
        write_lines(data / "result" / model / "BFCL_v4_multi_turn_base_result.json",
                    [{"id": qid, "result": _multi_turn_result(qid)} for qid in answered])
    report = import_bfcl(data / name, tmp_path / "ds", results=[data / "result"])
    assert report.skipped_total == 0
    merged = tmp_path / "traces.jsonl.gz"
    with gzip.open(merged, "wt", encoding="utf-8") as out:
        for trial, model in enumerate(("model-a", "model-b")):
            for line in read_jsonl(tmp_path / "ds" / "traces" / f"{model}.jsonl.gz"):
                out.write(json.dumps({**line, "trial": trial}) + "\n")
    result = CliRunner().invoke(app, ["run", "--dataset", str(tmp_path / "ds"), "--traces", str(merged),
                                      "--out", str(tmp_path / "out"), "--run-id", "two"], env={"COLUMNS": "200"})
    assert result.exit_code == 1, result.output  # the run completed, some rows are missing
    errors = json.loads((tmp_path / "out" / "runs" / "two" / "errors.json").read_text())
    missing = sorted((e["case_id"], e["trial"]) for e in errors if e["kind"] == "missing_trace")
    assert missing == [(f"multi_turn_base_180/turn-{t}", 1) for t in range(6)]
    assert all("agent model-b" in e["message"] for e in errors)
    summary = json.loads((tmp_path / "out" / "runs" / "two" / "summary.json").read_text())
    assert summary["rows"] == 5 + 6 + 5  # model-a: both conversations; model-b: the first
    assert summary["gate"]["counts"]["unscored_cases"] == 6 and not summary["gate"]["passed"]
    assert summary["gate"]["counts"]["blocking_rows"] == 6
