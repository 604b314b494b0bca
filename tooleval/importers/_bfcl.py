"""Import BFCL (Berkeley Function Calling Leaderboard, Apache-2.0) questions, possible answers and result files.

Source layout (``bfcl_eval/data`` of ShishirPatil/gorilla; ``../shared/data/bfcl``): ``BFCL_v4_<category>.json``
question files (JSON lines ``{id, question: [[messages]], function: [docs]}``), ``possible_answer/`` with the same
names, ``multi_turn_func_doc/`` with the multi-turn classes' function docs. One dataset per category
(``DIR/<category>/``; a single question file is written to ``DIR`` itself), ``case_id`` = BFCL's id:

* Single-turn categories: one case per question; references, each with its own argument rules, from the
  possible answer and the question's function docs (:mod:`tooleval.importers._bfcl_answers`); the docs in
  ``metadata.functions`` and, as tool specs, in the case's ``tools`` (what the schema check reads for the case).
* Irrelevance categories (``*irrelevance*``, no possible answers): cases expecting no call.
* Multi-turn categories: one case per (conversation, turn), ``case_id`` ``<id>/turn-<n>``, the turn's ground
  truth call strings parsed with :mod:`ast` (never evaluated); ``metadata.conversation_id`` and ``turn``.
  BFCL grades multi-turn by a check of each turn's calls (its ground-truth calls among the model's) and by the
  end state of its simulated environment; each turn case carries the match mode of the first
  (:func:`turn_match_mode`), and says in ``metadata.not_checked`` that the end state is not checked.
* ``tools.json``: the category's function docs as JSON Schema tool specs. A name documented differently by two
  questions (BFCL reuses names) is left out of ``tools.json`` (the docs stay in each case's metadata); the
  import's notes count them.
* Result files (``--results``): JSON lines ``{id, result}`` as BFCL writes them (``result/<model>/<group>/``):
  ``result`` a list of ``{"<func>": "<JSON argument text>"}`` (or an object), text = an answer without a call
  (zero calls); multi-turn results nest turns -> steps -> calls. A dotted function name is written as the
  references write it (``metadata.renamed_calls`` lists each). ``"Error during inference: ..."`` becomes a trace
  that records the error (a failing ``generation_error`` row; never dropped); so does each turn a multi-turn
  result never reached (fewer turns than its question: it ended early), and the import's notes name those
  results. Written to
  ``<category>/traces/<agent>.jsonl.gz`` where the agent is the model folder (BFCL's group folders ``non_live``,
  ``live``, ``multi_turn``... skipped) unless ``--agent`` names it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from tooleval.canonical import canonical_json
from tooleval.errors import InputFileError
from tooleval.models import calls_from_messages
from tooleval.importers._bfcl_answers import answer_calls, parse_call_string, tool_name, tool_spec
from tooleval.importers._common import check_revision, json_bytes
from tooleval.importers._stream import DatasetStage, ImportReport, SkipLine, iter_source_lines

__all__ = ["import_bfcl", "MULTI_TURN_DOCS"]

LICENSE = "Apache-2.0"
_QUESTION_FILE = re.compile(r"BFCL_v\d+_(?P<category>.+?)(?P<result>_result)?\.json")

MULTI_TURN_DOCS = {
    "GorillaFileSystem": "gorilla_file_system.json", "MathAPI": "math_api.json", "MessageAPI": "message_api.json",
    "TwitterAPI": "posting_api.json", "TicketAPI": "ticket_api.json", "TradingBot": "trading_bot.json",
    "TravelAPI": "travel_booking.json", "VehicleControlAPI": "vehicle_control.json", "WebSearchAPI": "web_search.json",
    "MemoryAPI_kv": "memory_kv.json", "MemoryAPI_vector": "memory_vector.json", "MemoryAPI_rec_sum": "memory_rec_sum.json",
}
"""Multi-turn class -> its function-doc file in ``multi_turn_func_doc/`` (BFCL's ``MULTI_TURN_FUNC_DOC_FILE_MAPPING``)."""


def _category(path: Path) -> str:
    match = _QUESTION_FILE.fullmatch(path.name)
    if match is None:
        raise InputFileError(path, None, "not a BFCL file name (BFCL_v4_<category>.json).", "keep BFCL's file names.")
    return match["category"]


def _lines(path: Path, digest: Any, report: ImportReport) -> list[tuple[str, dict[str, Any]]]:
    """``(where, record)`` of every readable line; unreadable ones are counted as skipped."""
    out = []
    for line in iter_source_lines([path], digest):
        if line.error == "blank":
            continue
        if line.error is not None or not isinstance(line.value, dict) or "id" not in line.value:
            report.read += 1
            report.skip(line.error or "not an object with an id", line.where)
            continue
        out.append((line.where, line.value))
    return out


def _json_lines(path: Path) -> list[Any]:
    """A small JSON-lines file (function docs, possible answers), read whole."""
    values = []
    for line in iter_source_lines([path]):
        if line.error == "blank":
            continue
        if line.error is not None:
            raise InputFileError(path, line.line, f"{line.error}.", "repair or re-download the file.")
        values.append(line.value)
    return values


class _Category:
    """One category being converted: cases, tool docs, notes."""

    def __init__(self, root: Path, category: str, report: ImportReport) -> None:
        self.root, self.category, self.report = root, category, report
        self.docs: dict[str, set[str]] = defaultdict(set)
        self.specs: dict[str, dict[str, Any]] = {}
        self.per_call = 0
        self.multi_docs: dict[Path, dict[str, Any]] = {}

    def add_docs(self, docs: list[dict[str, Any]]) -> None:
        for doc in docs:
            spec = tool_spec(doc)
            self.docs[spec["name"]].add(canonical_json(spec))
            self.specs.setdefault(spec["name"], spec)

    def tools(self) -> list[dict[str, Any]]:
        clashes = sorted(name for name, docs in self.docs.items() if len(docs) > 1)
        if clashes:
            self.report.notes.append(
                f"{self.category}: {len(clashes)} tool names documented differently by two questions are not in "
                "tools.json (each case keeps its own docs in metadata.functions)."
            )
        return [self.specs[name] for name in sorted(self.specs) if name not in clashes]

    def multi_turn_docs(self, classes: list[str]) -> dict[str, dict[str, Any]]:
        docs = {}
        for cls in classes:
            path = self.root / "multi_turn_func_doc" / MULTI_TURN_DOCS.get(cls, f"{cls}.json")
            if path not in self.multi_docs:
                if not path.is_file():
                    raise SkipLine(f"no function docs for class {cls}")
                self.multi_docs[path] = {doc["name"]: doc for doc in _json_lines(path)}
            docs.update(self.multi_docs[path])
        return docs

    def cases(self, question: dict[str, Any], answer: dict[str, Any] | None) -> list[dict[str, Any]]:
        meta = {k: v for k, v in question.items() if k not in ("id", "question", "function")}
        meta["category"] = self.category
        turns = question.get("question") or []
        if "multi_turn" in self.category:
            return self._multi_turn(question, answer, turns, meta)
        if "irrelevance" in self.category:
            calls, rules, required = [], {}, {}
        elif answer is None:
            raise SkipLine("no possible answer")
        else:
            truth = answer["ground_truth"]
            functions = question.get("function") or []
            if _is_simple(self.category) and len(truth) == 1 and len(functions) == 1 and isinstance(truth[0], dict):
                # BFCL's simple checker takes the function's name from the question's doc, not from the answer
                truth = [{functions[0].get("name"): value for value in truth[0].values()}]
            try:
                calls, rules, required = answer_calls(truth, functions)
            except (ValueError, TypeError, AttributeError, KeyError) as exc:
                raise SkipLine("possible answer is not [{func: {param: [values]}}]") from exc
            self.per_call += sum("argument_rules" in call for call in calls) > 1 and \
                len({call["name"] for call in calls}) < len(calls)
            meta["possible_answer"] = answer["ground_truth"]
        self.add_docs(question.get("function") or [])
        meta["functions"] = question.get("function") or []
        case = {"case_id": str(question["id"]), "input": [m for turn in turns for m in turn],
                "expected_calls": calls, "slice": self.category, "metadata": meta,
                # the schema check reads the question's own docs: BFCL documents one name differently across
                # questions, and tools.json can hold only one of them
                "tools": [tool_spec(doc) for doc in question.get("function") or []]}
        if rules:
            case["argument_rules"] = rules
        if required:
            case["required_arguments"] = required
        if "parallel" in self.category and len(calls) > 1:
            # BFCL's parallel checker pairs each possible answer, in order, with the first model call it accepts:
            # where one call fits two answers its verdict depends on the order of the calls, and so does ours
            case["pairing"] = "first_fit"
        return [case]

    def _multi_turn(self, question, answer, turns, meta) -> list[dict[str, Any]]:
        if answer is None:
            raise SkipLine("no possible answer")
        docs = self.multi_turn_docs(question.get("involved_classes") or [])
        self.add_docs(list(docs.values()))
        truths = answer.get("ground_truth")
        if not isinstance(truths, list) or len(truths) != len(turns):
            raise SkipLine("question and ground truth have different numbers of turns")
        cases = []
        for turn, (messages, truth) in enumerate(zip(turns, truths)):
            try:
                calls = [parse_call_string(text, docs) for text in truth]
            except (ValueError, SyntaxError, TypeError) as exc:
                raise SkipLine(f"ground truth call not parseable ({exc})") from exc
            case = {
                "case_id": f"{question['id']}/turn-{turn}", "input": messages, "expected_calls": calls,
                "slice": self.category,
                "metadata": {**meta, "conversation_id": str(question["id"]), "turn": turn, "ground_truth": truth,
                             "not_checked": END_STATE_NOT_CHECKED},
            }
            case.update(turn_match_mode(calls))
            cases.append(case)
        return cases


INFERENCE_ERROR = "Error during inference"
"""How BFCL's generation marks a result whose model call failed (``_llm_response_generation.py``)."""


def _is_simple(category: str) -> bool:
    return not any(word in category for word in ("parallel", "multiple", "irrelevance", "multi_turn", "relevance"))


def _undecodable(result: Any) -> bool:
    """Whether BFCL's decoding of a function-calling result fails (an argument text that is not a JSON object)."""
    if not isinstance(result, list):
        return False
    for item in result:
        if not isinstance(item, dict) or len(item) != 1:
            return True
        args = next(iter(item.values()))
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                return True
        if not isinstance(args, dict):
            return True
    return False


END_STATE_NOT_CHECKED = (
    "end state: BFCL also compares the state of its simulated environment after each turn with the ground "
    "truth's; tooleval does not run the environment, so a turn that makes the reference calls and changes the "
    "state further, or reaches the state by other calls, gets the verdict of its calls alone")


STATE_CHANGING = frozenset({
    # GorillaFileSystem
    "cd", "cp", "echo", "mkdir", "mv", "rm", "rmdir", "touch",
    # MessageAPI, TwitterAPI (posting_api), TicketAPI
    "add_contact", "delete_message", "message_login", "send_message", "authenticate_twitter", "comment",
    "follow_user", "mention", "post_tweet", "retweet", "unfollow_user", "close_ticket", "create_ticket",
    "edit_ticket", "logout", "resolve_ticket", "ticket_login",
    # TradingBot, TravelAPI
    "add_to_watchlist", "cancel_order", "fund_account", "place_order", "remove_stock_from_watchlist",
    "trading_login", "trading_logout", "withdraw_funds", "authenticate_travel", "book_flight", "cancel_booking",
    "purchase_insurance", "register_credit_card", "set_budget_limit",
    # VehicleControlAPI
    "activateParkingBrake", "adjustClimateControl", "fillFuelTank", "lockDoors", "pressBrakePedal",
    "releaseBrakePedal", "setCruiseControl", "setHeadlights", "set_navigation", "startEngine",
})
"""The multi-turn functions that change their environment's state (the others read it; MathAPI only computes)."""


def turn_match_mode(calls: list[dict[str, Any]]) -> dict[str, Any]:
    """The match mode that gives BFCL's per-turn verdict on a turn case's calls.

    BFCL passes a turn when the execution results of its ground-truth calls are among the model's (extra calls
    allowed) and the state matches: ``superset``. When the turn changes state and has several calls, their order
    decides the state and what later reads return, so the reference must also appear in order (``ordered``). A
    turn whose ground truth is empty (the request cannot be done with the functions given) is not judged by
    BFCL's runner: it executes whatever the model calls there, for the later turns' state, and goes on to the next
    turn (its irrelevance checker exists but the runner never calls it), so any calls pass: ``superset`` of
    nothing."""
    if not calls:
        return {"match_mode": "superset"}
    ordered = len(calls) > 1 and any(call["name"] in STATE_CHANGING for call in calls)
    return {"match_mode": "superset", "ordered": ordered} if ordered else {"match_mode": "superset"}


def _assistant(step: Any, renamed: list[dict[str, str]]) -> dict[str, Any]:
    """One model output (a list of ``{"<func>": <args>}``, or text) as an assistant message. A dotted function
    name (``math.factorial``, as prompt-mode models write BFCL's names) is written as the references write it
    (``math_factorial``); ``renamed`` gets ``{"from", "to"}`` for each."""
    if not isinstance(step, list):
        return {"role": "assistant", "content": step if isinstance(step, str) else json.dumps(step)}
    calls = []
    for index, item in enumerate(step):
        if not isinstance(item, dict) or len(item) != 1:
            raise SkipLine("a result call is not a one-key object {func: args}")
        (name, args), = item.items()
        if isinstance(name, str) and tool_name(name) != name:
            renamed.append({"from": name, "to": tool_name(name)})
            name = tool_name(name)
        calls.append({"id": f"call_{index}", "type": "function", "function": {"name": name, "arguments": args}})
    return {"role": "assistant", "content": None, "tool_calls": calls}


def _inference_error(result: Any) -> str | None:
    return result if isinstance(result, str) and result.startswith(INFERENCE_ERROR) else None


def _result_traces(record: dict[str, Any], inputs: dict[str, Any], agent: str, multi_turn: bool,
                   irrelevance: bool = False) -> list[dict]:
    """Recorded traces of one result line (one per turn for multi-turn). An inference error gives traces that
    carry it as their ``error`` (failing rows that say why), one per turn of the conversation."""
    result = record.get("result")
    base = str(record["id"])
    error = _inference_error(result)
    if not multi_turn:
        if base not in inputs:
            raise SkipLine("result id not among the questions")
        if error is not None:
            return [_trace(base, list(inputs[base]), agent, error=error)]
        if irrelevance and _undecodable(result):
            # BFCL decodes nothing from it, which in an irrelevance category is the right answer (no call): the
            # output is kept as the reply's text, not as calls
            trace = _trace(base, [*inputs[base], _assistant(json.dumps(result), [])], agent)
            trace["metadata"]["undecodable_calls"] = True
            return [trace]
        renamed: list[dict[str, str]] = []
        return [_trace(base, [*inputs[base], _assistant(result, renamed)], agent, renamed)]
    if error is not None:
        turns = [f"{base}/turn-{n}" for n in range(len(inputs)) if f"{base}/turn-{n}" in inputs]
        if not turns:
            raise SkipLine("result id not among the questions")
        return [_trace(case_id, list(inputs[case_id]), agent, error=error) for case_id in turns]
    if not isinstance(result, list):
        raise SkipLine("a multi-turn result is not a list of turns")
    traces = []
    for turn, steps in enumerate(result):
        case_id = f"{base}/turn-{turn}"
        if case_id not in inputs:
            raise SkipLine("result turn not among the questions' turns")
        renamed = []
        replies = [_assistant(step, renamed) for step in (steps if isinstance(steps, list) else [steps])]
        traces.append(_trace(case_id, [*inputs[case_id], *replies], agent, renamed))
    asked = _turns_asked(base, inputs)
    if len(result) < asked:
        # BFCL stops a conversation whose model kept failing (force-terminated) and fails it whole; the turns it
        # never reached get rows that fail and say so, rather than no rows at all
        error = (f"{ENDED_EARLY}: the result has {len(result)} of the question's {asked} turns (BFCL: "
                 "multi_turn:force_terminated)")
        traces.extend(_trace(f"{base}/turn-{turn}", list(inputs[f"{base}/turn-{turn}"]), agent, error=error)
                      for turn in range(len(result), asked))
    return traces


ENDED_EARLY = "ended early"
"""How the traces of the turns a multi-turn result never reached start their ``error``."""


def _turns_asked(base: str, inputs: dict[str, Any]) -> int:
    turns = 0
    while f"{base}/turn-{turns}" in inputs:
        turns += 1
    return turns


def _trace(case_id: str, messages: list[dict[str, Any]], agent: str, renamed: list | None = None,
           error: str | None = None) -> dict[str, Any]:
    trace = {"case_id": case_id, "trial": 0, "agent": {"name": agent, "model": agent}, "messages": messages,
             "metadata": {"source": "bfcl"}}
    if renamed:
        trace["metadata"]["renamed_calls"] = renamed
    if error is not None:
        trace["error"] = error
    return trace


_GROUP_FOLDERS = {"non_live", "live", "multi_turn", "agentic", "memory", "format_sensitivity", "kv", "vector",
                  "rec_sum", "web_search"}
"""BFCL v4 writes ``result/<model>/<group>/`` (``agentic/memory/<backend>/`` for memory): folders that name a
group of categories, not the model."""


def result_agent(path: Path) -> str:
    """The model a result file belongs to: its nearest folder that is not one of BFCL's group folders."""
    folder = path.parent
    while folder.name in _GROUP_FOLDERS and folder.parent != folder:
        folder = folder.parent
    return folder.name


def _question_files(src: Path) -> tuple[Path, list[Path], bool]:
    """``(data root, question files, single)``."""
    if src.is_file():
        return src.parent, [src], True
    if not src.is_dir():
        raise InputFileError(src, None, "source not found.", "pass BFCL's data folder or one question file.")
    files = sorted(p for p in src.glob("BFCL_v*_*.json") if not p.name.endswith("_result.json"))
    if not files:
        raise InputFileError(src, None, "no BFCL_v*_<category>.json question file.", "pass BFCL's data folder.")
    return src, files, False


def _result_files(results: list[Path]) -> dict[str, list[Path]]:
    by_category: dict[str, list[Path]] = defaultdict(list)
    for path in results:
        path = Path(path)
        found = sorted(path.rglob("BFCL_v*_*_result.json")) if path.is_dir() else [path]
        if not found or not all(p.is_file() for p in found):
            raise InputFileError(path, None, "no BFCL result file here.", "pass BFCL_v4_<category>_result.json files.")
        for file in found:
            by_category[_category(file)].append(file)
    return by_category


def import_bfcl(
    src: Path,
    out: Path,
    *,
    name: str | None = None,
    revision: str | None = None,
    results: list[Path] | None = None,
    agent: str | None = None,
) -> ImportReport:
    """Import BFCL question and possible-answer files (and result files) as datasets, one per category.

    Args:
        src: BFCL's data folder (question files, ``possible_answer/``, ``multi_turn_func_doc/``), or one question
            file (its answers and docs are looked up beside it).
        out: ``out/<category>/`` per category for a folder; ``out`` itself for one question file.
        name: Dataset name (prefix ``<name>-<category>`` for a folder); default: the folder name.
        revision: Revision of every dataset; default ``"src-"`` + 12 hex digits of the SHA-256 of the category's
            question and answer files.
        results: BFCL result files or folders holding them (``BFCL_v4_<category>_result.json``).
        agent: Agent name of the result files; default: each result file's folder name.

    Returns:
        The counts: questions and result lines read, converted and skipped (with reasons), and notes.

    Raises:
        UnsafeRevisionError: ``revision`` is unsafe.
        InputFileError: the source is missing, a file name is not BFCL's, a possible-answer or doc file is not
            JSON lines, or results name a category that is not imported.
    """
    if revision is not None:
        check_revision(revision)
    report = ImportReport()
    root, files, single = _question_files(Path(src))
    by_category = _result_files(results or [])
    categories = {_category(path): path for path in files}
    unknown = sorted(set(by_category) - set(categories))
    if unknown:
        raise InputFileError(by_category[unknown[0]][0], None, f"results of category {unknown[0]!r}, whose questions "
                             "are not imported.", "pass the BFCL data folder that holds its question file.")
    for category, path in categories.items():
        target = Path(out) if single else Path(out) / category
        dataset_name = name if single and name else (f"{name}-{category}" if name else category)
        report.datasets.append(_write_category(root, path, target, dataset_name, revision,
                                               by_category.get(category, []), agent, report))
    return report


_NAMED = 10
"""Results an import note names before it counts the rest."""


def _write_category(root, path, out, name, revision, result_files, agent, report) -> Path:
    """Write the dataset of the category whose question file is ``path`` (its results ``result_files``) to
    ``out`` and return the folder."""
    category = _category(path)
    converter = _Category(root, category, report)
    digest = hashlib.sha256()
    answer_path = root / "possible_answer" / path.name
    answers = {str(a["id"]): a for a in _json_lines(answer_path)} if answer_path.is_file() else {}
    if answer_path.is_file():
        digest.update(answer_path.read_bytes())
    inputs: dict[str, Any] = {}
    with DatasetStage(out) as stage:
        cases = stage.jsonl("cases.jsonl")
        for where, question in _lines(path, digest, report):
            report.read += 1
            try:
                built = converter.cases(question, answers.get(str(question["id"])))
            except SkipLine as skip:
                report.skip(skip.reason, where)
                continue
            for case in built:
                cases.write(case)
                inputs[case["case_id"]] = case["input"]
            report.converted += 1
        if converter.per_call:
            report.notes.append(f"{category}: {converter.per_call} cases call one tool several times; each "
                                "reference call keeps its own acceptable values.")
        errors = 0
        ended: list[str] = []
        for file in result_files:
            model = agent or result_agent(file)
            traces = stage.jsonl(f"traces/{model}.jsonl.gz")
            for where, record in _lines(file, None, report):
                report.read += 1
                try:
                    written = _result_traces(record, inputs, model, "multi_turn" in category,
                                             "irrelevance" in category)
                except SkipLine as skip:
                    report.skip(skip.reason, where)
                    continue
                errors += _inference_error(record.get("result")) is not None
                missing = sum(str(t.get("error", "")).startswith(ENDED_EARLY) for t in written)
                if missing:
                    ended.append(f"{record['id']} ({len(written) - missing} of {len(written)} turns"
                                 + (f", {model}" if len(result_files) > 1 else "") + ")")
                for trace in written:
                    traces.write(trace)
                    calls = calls_from_messages(trace["messages"])
                    report.calls += len(calls)
                    report.malformed_calls += sum(call.malformed for call in calls)
                report.converted += 1
        if errors:
            report.notes.append(f"{category}: {errors} results are inference errors; their rows fail with the "
                                "error (generation_error), as BFCL counts them wrong.")
        if ended:
            named = ", ".join(ended[:_NAMED]) + (f" and {len(ended) - _NAMED} more" if len(ended) > _NAMED else "")
            report.notes.append(f"{category}: {len(ended)} results ended early (fewer turns than their question: "
                                f"{named}); each missing turn is a row that fails with generation_error, and "
                                "BFCL fails the whole conversation (force-terminated).")
        stage.write_bytes("tools.json", json_bytes(converter.tools()))
        manifest = {
            "name": name, "revision": revision or "src-" + digest.hexdigest()[:12], "schema_version": 1,
            "description": f"BFCL {category}: {len(inputs)} cases"
                           + (" expecting no call (irrelevance)." if "irrelevance" in category else "."),
            "license": LICENSE,
            "source": f"ShishirPatil/gorilla berkeley-function-call-leaderboard bfcl_eval/data/{path.name}",
        }
        stage.write_bytes("dataset.json", json_bytes(manifest))
        return stage.commit()
