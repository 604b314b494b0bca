"""The run's redactor seeds from a reader of ``cases.jsonl`` that never decodes a line the seeding would find nothing
in (``Redactor.seeds_nothing``): the base secrets are those of seeding from every case, and only the lines that
name a redacted field (in any letter case or spelling), hold a credential or an escape are read."""

from __future__ import annotations

import functools
import json

import pytest

from tests.support.paths import BUNDLED
from tooleval.capture.redaction import DEFAULT_FIELDS, RedactionConfig, Redactor
from tooleval.dataset import stream_case_references, stream_cases
from tooleval.synth import write_synth


def redactor() -> Redactor:
    return Redactor(RedactionConfig(fields=sorted(DEFAULT_FIELDS), paths=[], key_digest="k"), b"k" * 32)


def seeded(cases) -> dict:
    made = redactor()
    made.seed_cases(cases)
    return json.loads(made.seed_state())


def read_lines(path):
    """A reader of ``path`` that records which lines it decoded (by their case id) and which it skipped."""
    decoded, skipped = [], []

    def reader(screen):
        def counted(raw: bytes) -> bool:
            skip = screen(raw)
            (skipped if skip else decoded).append(json.loads(raw)["case_id"])
            return skip
        return stream_case_references(path, skip=counted if screen is not None else None)
    return reader, decoded, skipped


@pytest.mark.parametrize("profile", ["bfcl", "tau"])
def test_screened_seed_equals_every_case_seed(tmp_path, profile):
    path = write_synth(400, 0, profile, tmp_path / "data").path / "cases.jsonl"
    reader, decoded, skipped = read_lines(path)
    assert seeded(reader) == seeded(stream_cases(path))
    if profile == "bfcl":  # no synthetic bfcl case names a default field: none is decoded
        assert decoded == [] and len(skipped) > 0
    else:  # every tau case's system prompt names the profile's fields ("email"): each is read as before
        assert skipped == [] and len(decoded) > 0


def test_bundled_screened_seed_equals_every_case_seed():
    path = BUNDLED / "cases.jsonl"
    assert seeded(functools.partial(stream_case_references, path)) == seeded(stream_cases(path))


CALL = {"name": "f", "args": {"note": "none"}}


def case(case_id: str, text: str, args: dict | None = None, **extra) -> dict:
    return {"case_id": case_id, "input": [{"role": "user", "content": text}],
            "expected_calls": [{"name": "f", "args": args if args is not None else {"note": "none"}}], **extra}


JWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"

# each line, and whether a screen that reads only the line's bytes must read it (True: it may hold a secret)
LINES = [
    (case("quiet", "refund order 7 please"), False),
    (case("quiet-unicode", "café: ünïcode ✓ = fine"), False),  # a pair's colon, no name: nothing to find
    (case("upper", "x", {"EMAIL": "ann@example.com"}), True),  # a name in capitals is the name
    (case("pair", "my email: bob@example.com"), True),  # a key: value pair in a text
    (case("embedded", "x", {"payload": json.dumps({"phone": "+1 555 0100"})}), True),  # JSON inside a string
    (case("bearer", "Authorization: Bearer abcdef0123456789"), True),  # a credential without any name
    (case("aws", "key AKIAIOSFODNN7EXAMPLE here"), True),
    (case("jwt", f"token {JWT}"), True),
    (case("outputs", "x", expected_outputs=["api_key=sk-123456789"]), True),
]


def test_lines_that_may_hold_a_secret_are_read(tmp_path):
    path = tmp_path / "cases.jsonl"
    with path.open("w") as handle:
        for data, _ in LINES:
            handle.write(json.dumps(data, ensure_ascii=False) + "\n")
        # a name written with a JSON escape, and one whose capital is the Kelvin sign (lower-cased to "k"): both
        # are names once decoded, so neither line may be skipped
        handle.write('{"case_id": "escaped", "input": "x", "expected_calls": [{"name": "f", "args": '
                     '{"\\u0065mail": "eve@example.com"}}]}\n')
        handle.write('{"case_id": "kelvin", "input": "x", "expected_calls": [{"name": "f", "args": '
                     '{"api_\u212aey": "sekret-value-1"}}]}\n')
    reader, decoded, skipped = read_lines(path)
    screened = seeded(reader)
    every = seeded(stream_cases(path))
    assert screened["base"] == every["base"]
    # the secrets each line holds, found by the slow walk and by the screened seeding alike
    for secret in ("ann@example.com", "bob@example.com", "+1 555 0100", "abcdef0123456789", "AKIAIOSFODNN7EXAMPLE",
                   JWT, "sk-123456789", "eve@example.com", "sekret-value-1"):
        assert secret in screened["base"], secret
    assert skipped == ["quiet", "quiet-unicode"]
    assert decoded == [data["case_id"] for data, read in LINES if read] + ["escaped", "kelvin"]
    # what seeding keeps of texts with pairs: the same, but for texts with no pair of a name at all, which seeding
    # from every case remembers as scanned (an empty answer the redactor computes again when it meets them)
    assert {text: pairs for text, pairs in screened["known"].items() if pairs} == \
        {text: pairs for text, pairs in every["known"].items() if pairs}


def test_names_not_spelled_alike_read_every_line(tmp_path):
    """A configured name that JSON may spell otherwise (a quote in it) turns the screen off: every line is read."""
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(json.dumps(case(f"c{i}", "nothing here")) + "\n" for i in range(3)))
    made = Redactor(RedactionConfig(fields=['we"ird'], paths=[], key_digest="k"), b"k" * 32)
    reader, decoded, skipped = read_lines(path)
    made.seed_cases(reader)
    assert decoded == [] and skipped == []  # no screen was given: the lines were read without one
