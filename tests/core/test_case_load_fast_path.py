"""A dataset's cases are read by orjson where that provably gives the strict reading's value, and their reference
arguments are not walked again for problems that reading already ruled out: the same cases, digests, calls and
errors as the strict way (``json.loads`` refusing repeated keys, ``json_value_problem`` over every value,
``Call.from_raw`` on each argument object, ``canonical_json`` for the digest)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.paths import BUNDLED
from tests.support.profiles import examples
from tooleval.canonical import MAX_DEPTH, canonical_json
from tooleval.dataset import _case_line, _read_line_value, case_digest, load_dataset
from tooleval.errors import InputFileError
from tooleval.models import PLAIN_VALUES, Call, Case
from tooleval.synth import write_synth


def strict_digest(case: Case) -> str:
    """case_digest as it was written before the fast path: canonical_json of the JSON dump."""
    content = case.model_dump(mode="json")
    if content.get("pairing") == "maximum":
        del content["pairing"]
    return hashlib.sha256(canonical_json(content).encode()).hexdigest()


def strict_case(line: str) -> Case:
    data = json.loads(line)
    if isinstance(data.get("case_id"), int):
        data["case_id"] = str(data["case_id"])
    return Case.model_validate(data)


@pytest.mark.parametrize("profile", ["bfcl", "tau"])
def test_synthetic_cases_equal_the_strict_reading(tmp_path, profile):
    data = write_synth(300, 0, profile, tmp_path / "data").path
    loaded = load_dataset(data)
    lines = [line for line in (data / "cases.jsonl").read_text().splitlines() if line.strip()]
    digests = loaded.cases.digests()
    assert len(lines) == len(loaded.cases) > 0
    for line in lines:
        case = strict_case(line)
        assert loaded.cases[case.case_id] == case  # read again by orjson, plain
        assert digests[case.case_id] == strict_digest(case) == case_digest(case)


def test_bundled_digests_unchanged():
    loaded = load_dataset(BUNDLED)
    lines = [line for line in (BUNDLED / "cases.jsonl").read_text().splitlines() if line.strip()]
    assert len(lines) == 50  # ../shared/data/README.md: the bundled airline dataset holds 50 cases
    for line in lines:
        case = strict_case(line)
        assert loaded.cases.digests()[case.case_id] == strict_digest(case)


def test_case_with_floats_digest_by_hand():
    # canonical JSON of a float argument is Python's repr: 1e-07 (orjson would write 1e-7), 0.1, and 250.0 -> 250
    case = Case.model_validate({"case_id": "f", "input": [{"role": "user", "content": "x"}],
                                "expected_calls": [{"name": "t", "args": {"b": 1e-07, "a": 0.1, "c": 250.0}}]})
    text = canonical_json({k: v for k, v in case.model_dump(mode="json").items() if k != "pairing"})
    assert '"args":{"a":0.1,"b":1e-07,"c":250}' in text
    assert case_digest(case) == hashlib.sha256(text.encode()).hexdigest() == strict_digest(case)


def _line(tmp_path: Path, text: str):
    path = tmp_path / "cases.jsonl"
    return _case_line(path, 1, text.encode() + b"\n")


def test_line_reading_plain_or_strict(tmp_path):
    plain = _line(tmp_path, '{"case_id": "a", "n": 1.5}')
    assert plain.plain and plain.data == {"case_id": "a", "n": 1.5}
    wide = _line(tmp_path, '{"case_id": "a", "n": 123456789012345678901234567890}')
    assert not wide.plain and wide.data["n"] == 123456789012345678901234567890  # orjson would read a float
    nan = _line(tmp_path, '{"case_id": "a", "n": NaN}')  # the strict reader reads it; the case check refuses it
    assert not nan.plain and nan.data["n"] != nan.data["n"]
    deep = '{"case_id": "a", "d": ' + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "}"
    assert not _line(tmp_path, deep).plain
    assert _line(tmp_path, "   ") is None
    with pytest.raises(InputFileError, match="repeats the key 'case_id'"):
        _line(tmp_path, '{"case_id": "a", "case_id": "b"}')
    with pytest.raises(InputFileError, match="not valid JSON"):
        _line(tmp_path, '{"case_id": ')


def test_bad_values_still_named_with_file_and_line(tmp_path):
    folder = tmp_path / "ds"
    folder.mkdir()
    for name in ("dataset.json", "tools.json"):
        (folder / name).write_bytes((BUNDLED / name).read_bytes())
    good = (BUNDLED / "cases.jsonl").read_text().splitlines()[0]
    bad = json.loads(good)
    bad["case_id"] = "nan-case"
    bad_text = json.dumps(bad)[:-1] + ', "weight": NaN}'
    (folder / "cases.jsonl").write_text(good + "\n" + bad_text + "\n")
    with pytest.raises(InputFileError) as caught:
        load_dataset(folder)
    assert caught.value.line == 2 and "NaN" in str(caught.value)


def test_read_again_value_and_plainness():
    assert _read_line_value(b'{"a": 1}\n') == ({"a": 1}, True)
    assert _read_line_value(b'{"a": 12345678901234567890123}') == ({"a": 12345678901234567890123}, False)
    assert _read_line_value(b'{"a": NaN}')[1] is False  # read by json, never plain
    assert _read_line_value(b'{"a": ' + b"[" * MAX_DEPTH + b"]" * MAX_DEPTH + b"}")[1] is False


plain_args = st.recursive(
    st.none() | st.booleans() | st.integers(-(2 ** 63), 2 ** 63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=6),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3),
    max_leaves=15,
).map(lambda value: {"v": value})


@settings(max_examples=examples(300), deadline=None)
@given(plain_args)
def test_call_from_plain_args_equals_from_raw(args):
    fast, strict = Call.from_plain_args("tool", args), Call.from_raw("tool", args)
    assert fast == strict and fast.args_json == strict.args_json and fast.key == strict.key


def test_plain_context_builds_the_same_case():
    line = {"case_id": "c", "input": [{"role": "user", "content": "hi"}],
            "expected_calls": [{"name": "t", "args": {"x": 2.0, "y": [1.5, {"z": "w"}]}}],
            "accepted_plans": [[{"name": "u", "args": {}}]]}
    assert (Case.model_validate(json.loads(json.dumps(line)), context={PLAIN_VALUES: True})
            == Case.model_validate(json.loads(json.dumps(line))))


@pytest.mark.parametrize("depth", [260, 400])
def test_a_case_nested_past_the_models_writer_is_named(tmp_path, depth):
    """Python's reader reads a line nested a few hundred levels deep, but pydantic's writer gives up past ~255 (the
    digest dumps the case): the load names the line instead of stopping on a bare ValueError."""
    folder = tmp_path / "ds"
    folder.mkdir()
    for name in ("dataset.json", "tools.json"):
        (folder / name).write_bytes((BUNDLED / name).read_bytes())
    good = (BUNDLED / "cases.jsonl").read_text().splitlines()[0]
    deep = {**json.loads(good), "case_id": "deep", "provenance": json.loads("[" * depth + "]" * depth)}
    (folder / "cases.jsonl").write_text(good + "\n" + json.dumps(deep) + "\n")
    with pytest.raises(InputFileError) as caught:
        load_dataset(folder)
    assert caught.value.line == 2 and "nested too deeply" in caught.value.problem
