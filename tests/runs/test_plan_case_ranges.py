"""The plan's check of a large ``cases.jsonl`` split into byte ranges (read by the run's workers, then joined) gives
the dataset one pass over the file gives: the same cases at the same places, the same digests, slices and
confidential tools, and the same first error (a case id repeated in a later range named on its later line, a bad
line named by its line in the file); and a plan made with the ranges is the plan made without them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tooleval.capture.recorded import trace_spans
from tooleval.dataset import join_case_parts, load_case_range, load_dataset, stream_cases
from tooleval.errors import InputFileError
from tooleval.runs.spec import RunSpec


def _case(case_id: str, **extra) -> dict:
    return {"case_id": case_id, "input": f"do {case_id}", "expected_calls": [{"name": "get", "args": {"id": 1.5}}],
            **extra}


LINE_KINDS = {
    "case": lambda c: json.dumps(_case(c)).encode() + b"\n",
    "crlf": lambda c: json.dumps(_case(c)).encode() + b"\r\n",
    "sliced": lambda c: json.dumps(_case(c, slice="s1")).encode() + b"\n",
    "confidential": lambda c: json.dumps(_case(c, tools=[{"name": "vault", "confidential_fields": ["pin"]}])).encode()
    + b"\n",
    "int_id": lambda c: json.dumps({**_case(c), "case_id": 7}).encode() + b"\n",
    "blank": lambda c: b"\n",
    "spaces": lambda c: b"   \n",
    "not_json": lambda c: b'{"case_id": "' + c.encode() + b'", \n',
    "nan": lambda c: json.dumps(_case(c))[:-1].encode() + b', "metadata": {"x": NaN}}\n',
    "no_input": lambda c: json.dumps({"case_id": c, "expected_calls": []}).encode() + b"\n",
    "repeated_key": lambda c: b'{"case_id": "' + c.encode() + b'", "case_id": "Z", "input": "x"}\n',
    "not_utf8": lambda c: json.dumps(_case(c))[:-1].encode() + b', "metadata": {"x": "\xff"}}\n',
}


def _load(path: Path, parts: int | None):
    """``(cases as comparable values, None)`` or ``(None, the error's text and line)``."""
    try:
        if parts is None:
            cases = join_case_parts(path, [load_case_range(path)])
        else:
            spans = trace_spans(path, parts)
            assert spans[0][0] == 0 and spans[-1][1] == path.stat().st_size
            cases = join_case_parts(path, [load_case_range(path, span) for span in spans])
    except InputFileError as exc:
        return None, (str(exc), exc.line)
    return (cases._index, cases.digests(), cases.slices(), cases.confidential_tools()), None


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.tuples(st.sampled_from(sorted(LINE_KINDS)), st.sampled_from(["A", "B", "C", "D"])),
                      min_size=1, max_size=20),
       parts=st.integers(2, 9), last_newline=st.booleans())
def test_ranges_joined_equal_one_pass(tmp_path_factory, lines, parts, last_newline):
    data = b"".join(LINE_KINDS[kind](case_id) for kind, case_id in lines)
    if not last_newline:
        data = data.rstrip(b"\r\n") or b"\n"
    path = tmp_path_factory.mktemp("c") / "cases.jsonl"
    path.write_bytes(data)
    assert _load(path, parts) == _load(path, None)


def test_a_case_id_repeated_in_a_later_range_is_named_on_its_later_line(tmp_path):
    # lines 1-5: A, B, (blank), C, A again: four ranges put the two A lines in different ranges; the bad line 6
    # comes after the repeat, so one pass reports the repeat
    path = tmp_path / "cases.jsonl"
    path.write_bytes(LINE_KINDS["case"]("A") + LINE_KINDS["case"]("B") + b"\n" + LINE_KINDS["case"]("C")
                     + LINE_KINDS["case"]("A") + LINE_KINDS["not_json"]("E"))
    spans = trace_spans(path, 4)
    assert len(spans) >= 3
    with pytest.raises(InputFileError) as joined:
        join_case_parts(path, [load_case_range(path, span) for span in spans])
    assert joined.value.line == 5
    assert joined.value.problem == "duplicate case_id 'A' (first on line 1)."


def test_a_bad_line_in_a_later_range_is_named_by_its_line_in_the_file(tmp_path):
    path = tmp_path / "cases.jsonl"
    path.write_bytes(b"".join(LINE_KINDS["case"](c) for c in "ABCDEF") + LINE_KINDS["no_input"]("G")
                     + LINE_KINDS["case"]("H"))
    with pytest.raises(InputFileError) as serial:
        load_dataset_cases_whole(path)
    spans = trace_spans(path, 4)
    parts = [load_case_range(path, span) for span in spans]
    assert parts[0].failure is None and any(part.failure is not None for part in parts[1:])
    with pytest.raises(InputFileError) as joined:
        join_case_parts(path, parts)
    assert serial.value.line == joined.value.line == 7
    assert str(serial.value) == str(joined.value)


def load_dataset_cases_whole(path: Path):
    return join_case_parts(path, [load_case_range(path)])


def test_streamed_cases_are_the_loaded_cases_in_file_order():
    from tests.support.paths import BUNDLED

    loaded = load_dataset(BUNDLED)
    assert list(stream_cases(BUNDLED / "cases.jsonl")) == list(loaded.cases.values())


def test_a_plan_with_the_cases_read_in_ranges_is_the_plan_without(tmp_path, monkeypatch):
    """The ranges read here, in this process, as the workers read them; the redactor is seeded from the streamed
    cases before the dataset is loaded, and its seed is the one the loaded cases give."""
    import shutil

    import tooleval.runs.plan as plan_module
    from tests.support.paths import BUNDLED
    from tooleval.capture.redaction import Redactor

    data = tmp_path / "d"
    shutil.copytree(BUNDLED, data)
    monkeypatch.setattr(plan_module, "PARALLEL_CASES_BYTES", 1)  # the bundled cases.jsonl is small
    started: list[list] = []

    def case_parts(path, spans):
        started.append(spans)
        return lambda: [load_case_range(path, span) for span in spans]

    seeds: list[tuple] = []

    def on_redaction(config, key, cases):
        redactor = Redactor(config, key)
        redactor.seed_cases(cases)
        seeds.append(redactor.seed_state())

    spec = RunSpec(dataset=str(data), out=str(tmp_path / "out"), run_id="r1", workers=2)
    ranged = plan_module.plan_run(spec, case_parts=case_parts, on_redaction=on_redaction)
    plain = plan_module.plan_run(RunSpec(dataset=str(data), out=str(tmp_path / "out2"), run_id="r1", workers=2),
                                 on_redaction=on_redaction)
    assert len(started) == 1 and len(started[0]) == 4  # two ranges a worker
    assert ranged.index.table.equals(plain.index.table)
    assert (ranged.case_digests, ranged.errors, ranged.dataset.content_digest) == \
        (plain.case_digests, plain.errors, plain.dataset.content_digest)
    # the two plans' keys differ (two new folders): compare the seeds' secrets, not their tokens
    assert [sorted(json.loads(seed)["base"]) for seed in seeds[:1]] == \
        [sorted(json.loads(seeds[1])["base"])]
