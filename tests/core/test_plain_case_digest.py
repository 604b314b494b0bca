"""A case of the common shape is checked and digested from its line's values, without its model
(``plain_case_digest``), and seeds the run's redactor from those values (``stream_case_references``): the same
digest as the model's dump, the same seed as the models, and every other shape left to the model, which words
its problems as before."""

from __future__ import annotations

import hashlib
import json

import orjson
import pytest

from tests.support.paths import BUNDLED
from tooleval.canonical import canonical_json
from tooleval.capture.redaction import DEFAULT_FIELDS, RedactionConfig, Redactor
from tooleval.dataset import (CaseReferences, load_dataset, plain_case_digest, stream_case_references,
                              stream_cases)
from tooleval.errors import InputFileError
from tooleval.models import Case
from tooleval.synth import write_synth


def model_digest(data: dict) -> str:
    """The digest the model gives (case_digest as first written: canonical_json of the JSON dump)."""
    content = Case.model_validate(data).model_dump(mode="json")
    if content.get("pairing") == "maximum":
        del content["pairing"]
    return hashlib.sha256(canonical_json(content).encode()).hexdigest()


BASE = {"case_id": "c1", "input": [{"role": "user", "content": "refund 250 to ACC-1"}],
        "expected_calls": [{"name": "refund", "args": {"amount": 250, "account": "ACC-1"}}]}

PLAIN = [
    BASE,
    {**BASE, "slice": "refunds", "expected_outputs": ["done"], "metadata": {"reward": 0.5, "n": [1.0, 2]},
     "risk": "high", "owner": "qa@example.com", "provenance": {"source": "bfcl", "id": 7}, "last_reviewed": None},
    {**BASE, "input": "plain text, ünïcode ✓"},
    {**BASE, "expected_calls": []},
    {**BASE, "expected_calls": [{"name": "a"}, {"name": "b", "args": None}, {"name": "c", "args": {}}]},
    # integral floats are written as ints in the model's arguments; other floats stay
    {**BASE, "expected_calls": [{"name": "pay", "args": {"amount": 250.0, "rate": 0.25, "deep": {"x": [1.0]}}}]},
]


@pytest.mark.parametrize("data", PLAIN)
def test_plain_digest_is_the_models(data):
    assert plain_case_digest(orjson.loads(orjson.dumps(data))) == model_digest(data)


def test_integral_float_argument_digests_as_its_int():
    # by hand: the model keeps {"amount": 250} for 250.0, so both spellings are one case content
    as_float = {**BASE, "expected_calls": [{"name": "refund", "args": {"amount": 250.0, "account": "ACC-1"}}]}
    assert plain_case_digest(as_float) == plain_case_digest(BASE) == model_digest(BASE)


OTHER_SHAPES = [
    {**BASE, "case_id": 7},  # the model reads an integer id as its text
    {**BASE, "case_id": ""},
    {**BASE, "accepted_plans": [[]]},
    {**BASE, "match_mode": "strict"},
    {**BASE, "tools": []},
    {**BASE, "expected_calls": [{"name": "refund", "args": {}, "argument_rules": {"amount": {"tolerance": 1}}}]},
    {**BASE, "expected_calls": [{"name": "refund", "args": "{}"}]},
    {**BASE, "expected_calls": [{"name": 3}]},
    {**BASE, "input": [{"content": "no role"}]},
    {**BASE, "input": [{"role": ""}]},
    {**BASE, "input": {"role": "user"}},
    {**BASE, "slice": 3},
    {**BASE, "expected_outputs": [1]},
    {**BASE, "metadata": [1]},
    {k: v for k, v in BASE.items() if k != "input"},
]


@pytest.mark.parametrize("data", OTHER_SHAPES)
def test_other_shapes_are_left_to_the_model(data):
    assert plain_case_digest(data) is None


def test_a_case_of_another_shape_still_named_with_file_and_line(tmp_path):
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "dataset.json").write_text(json.dumps({"name": "d", "revision": "r1", "schema_version": 1}))
    lines = [BASE, {**BASE, "case_id": "c2", "input": [{"content": "no role"}]}]
    (folder / "cases.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(InputFileError) as caught:
        load_dataset(folder)
    assert caught.value.line == 2 and "input[0] has no 'role'" in str(caught.value)


def seed_of(cases) -> dict:
    redactor = Redactor(RedactionConfig(fields=sorted(DEFAULT_FIELDS), paths=[], key_digest="k"), b"k" * 32)
    redactor.seed_cases(cases)
    return json.loads(redactor.seed_state())


@pytest.mark.parametrize("profile", ["bfcl", "tau"])
def test_references_seed_as_the_cases_do(tmp_path, profile):
    data = write_synth(400, 0, profile, tmp_path / "data").path
    path = data / "cases.jsonl"
    references = list(stream_case_references(path))
    assert all(isinstance(item, CaseReferences) for item in references)  # the synthetic cases are of the shape
    seeded = seed_of(references)
    assert seeded == seed_of(stream_cases(path))
    assert seed_of(stream_case_references(load_dataset(data).cases)) == seeded


def test_bundled_references_seed_as_the_cases_do():
    path = BUNDLED / "cases.jsonl"
    assert seed_of(stream_case_references(path)) == seed_of(stream_cases(path))


def test_references_with_secrets_seed_as_the_cases_do(tmp_path):
    path = tmp_path / "cases.jsonl"
    cases = [
        {**BASE, "expected_calls": [{"name": "update", "args": {"email": "ann@example.com", "amount": 12.0}}]},
        {**BASE, "case_id": "c2", "input": [{"role": "user", "content": "call +1 555 0100"}],
         "expected_calls": [{"name": "call", "args": {"phone": "+1 555 0100", "card_number": 4111111111111111}}],
         "expected_outputs": ["ann@example.com"]},
        {**BASE, "case_id": "c3", "accepted_plans": [[{"name": "mail", "args": {"email": "bob@example.com"}}]]},
    ]
    path.write_text("".join(json.dumps(case) + "\n" for case in cases))
    references = list(stream_case_references(path))
    assert [type(item) for item in references] == [CaseReferences, CaseReferences, Case]  # plans: the model's
    seeded = seed_of(references)
    assert {"ann@example.com", "+1 555 0100", "bob@example.com"} <= set(seeded["base"])
    assert seeded == seed_of(stream_cases(path))
