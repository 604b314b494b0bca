"""How a JSON reader's error is worded in tooleval's messages: where the reader stopped, in a phrase that reads
whole ("Unterminated string starting at column 7", not "Unterminated string starting at, column 7")."""

from __future__ import annotations

import json

import pytest

from tooleval.errors import json_problem


@pytest.mark.parametrize(("text", "placed", "unplaced"), [
    # Python's own messages, e.g. 'Unterminated string starting at: line 1 column 7 (char 6)'
    ('{"a": "x', "Unterminated string starting at column 7", "Unterminated string"),
    ('{"a": "\x01"}', "Invalid control character at column 8", "Invalid control character"),
    ("x", "Expecting value at column 1", "Expecting value"),
    ("{'a': 1}", "Expecting property name enclosed in double quotes at column 2",
     "Expecting property name enclosed in double quotes"),
    ("{} x", "Extra data at column 4", "Extra data"),
])
def test_a_decode_error_reads_as_a_phrase(text: str, placed: str, unplaced: str) -> None:
    with pytest.raises(json.JSONDecodeError) as info:
        json.loads(text)
    assert json_problem(info.value) == placed
    assert json_problem(info.value, column=False) == unplaced


def test_another_error_keeps_its_text_before_a_colon() -> None:
    assert json_problem(ValueError("an object repeats the key 'a': keep one")) == "an object repeats the key 'a'"
    assert json_problem(RecursionError()) == "RecursionError"
