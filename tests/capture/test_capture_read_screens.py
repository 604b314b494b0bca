"""The cheap screens trace capture reads a line and walks its messages with, each checked where it must refuse or
look further, on hand-made lines and messages whose answers are known independently (written in the comments):

* a line read without stripping its line end (:func:`tooleval.capture.recorded._read_trace_bytes`) is the line
  read after stripping it, and a line whose end orjson does not skip is still stripped first;
* the :class:`~tooleval.capture.recorded.TraceLine` built field by field at once equals the dataclass's own;
* a result text is looked into for ``Error:`` only when its first character may begin one
  (:data:`tooleval.capture._walk._MAY_BEGIN_ERROR`, the same set over all of Unicode);
* argument text shorter than the nesting limit is not counted for brackets (it cannot hold that many);
* a message of two text values, a tool's result of four, or an assistant's of its text and its calls, is not
  looked into value by value, and any other such message is.
"""

from __future__ import annotations

import dataclasses
import sys

import pytest

from tooleval.canonical import compact_arguments, float_arguments
from tooleval.capture._walk import _MAY_BEGIN_ERROR, _failed, walk_messages
from tooleval.capture.recorded import (_WRAPPING, TraceLine, _plain_line, _read_trace_bytes, line_problem,
                                       plain_trace_shape)
from tooleval.capture.transcript import _is_error


class TestLineEnds:
    # the object {"case_id": "c", "trial": 0, "messages": []}, written inside the wrapping lists
    WRITTEN = b"[" * _WRAPPING + b'{"case_id":"c","trial":0,"messages":[]}' + b"]" * _WRAPPING
    VALUE = {"case_id": "c", "trial": 0, "messages": []}

    @pytest.mark.parametrize("end", [b"\n", b"", b"\r\n", b"  \n", b" \x0b\n", b"\x0c"])
    def test_every_line_end_reads_the_same_plain_line(self, end):
        # \x0b and \x0c are no JSON white space (orjson refuses them) but bytes.rstrip strips them, as before
        line = _read_trace_bytes(7, b'{"case_id": "c", "trial": 0, "messages": []}' + end)
        assert vars(line) == {"line": 7, "data": self.VALUE, "problem": None, "kind": "bad_trace", "plain": True,
                              "written": self.WRITTEN}

    @pytest.mark.parametrize("raw", [b"\n", b"   \r\n", b""])
    def test_a_blank_line_is_none(self, raw):
        assert _read_trace_bytes(1, raw) is None

    def test_a_repeated_key_before_the_line_end_is_still_found(self):
        # {"a": 1, "a": 2}: orjson keeps one member (two colons in the line, one in its writing)
        line = _read_trace_bytes(3, b'{"case_id": "c", "trial": 0, "a": 1, "a": 2}\n')
        assert line.kind == "duplicate_key" and line.problem.startswith("an object repeats the key 'a'")
        assert line.written is None and line.plain is False

    def test_nesting_past_the_limit_before_the_line_end_is_left_to_the_strict_reading(self):
        # 200 levels in all is the limit (the top object is level 1): 199 lists inside it pass, 200 do not
        ok = b'{"case_id": "c", "trial": 0, "x": ' + b"[" * 199 + b"]" * 199 + b"}\n"
        deep = b'{"case_id": "c", "trial": 0, "x": ' + b"[" * 200 + b"]" * 200 + b"}\n"
        assert _read_trace_bytes(1, ok).plain is True
        line = _read_trace_bytes(1, deep)
        assert line.plain is False and line.written is None
        assert line_problem(None, line, ("c", 0))[0] is not None  # type: ignore[arg-type]


class TestPlainLine:
    def test_equal_to_the_dataclass_built_its_own_way(self):
        data, written = {"case_id": "c"}, b"[{}]"
        built = _plain_line(4, data, written)
        reference = TraceLine(4, data, plain=True, written=written)
        assert built == reference and type(built) is TraceLine
        assert list(vars(built).items()) == list(vars(reference).items())  # the same fields, in the same order
        assert [field.name for field in dataclasses.fields(TraceLine)] == list(vars(built))
        with pytest.raises(dataclasses.FrozenInstanceError):
            built.line = 5  # type: ignore[misc]


class TestErrorScreen:
    def test_the_screen_is_every_character_that_may_begin_an_error(self):
        # str.lstrip strips the characters str.isspace names; casefold maps one character at a time
        found = {chr(code) for code in range(sys.maxunicode + 1)
                 if chr(code).isspace() or chr(code).casefold()[:1] == "e"}
        assert found == set(_MAY_BEGIN_ERROR)

    @pytest.mark.parametrize("text, failed", [
        ("Error: declined", True), ("error: x", True), ("ERROR:x", True), ("  error: x", True),
        ("\u3000Error: x", True), ("\u00a0ERROR: y", True), (" " * 70 + "error: late", True),
        ("Errors: none", False), ("E", False), ("", False), ('{"error": "x"}', False), ("no error: x", False),
        ("\u212aerror:", False),  # the Kelvin sign folds to "k"
    ])
    def test_agrees_with_the_full_check(self, text, failed):
        message = {"role": "tool", "content": text}
        assert _failed(message, text) is failed is _is_error(message, text)
        flagged = {"role": "tool", "content": text, "error": True}
        assert _failed(flagged, text) is True  # the flag alone says it failed


class TestFewValuedMessages:
    def test_a_text_message_is_plain(self):
        walked = walk_messages([{"role": "user", "content": "hi"}, {"content": "ok", "role": "assistant"}], {}, None)
        assert walked.view[:4] == ("ua", ["hi", "ok"], [], []) and walked.no_float is True

    @pytest.mark.parametrize("message, roles, flags, no_float", [
        ({"role": 1.5, "content": "x"}, ".", [], False),  # the role is a float
        ({"role": "user", "content": -0.0}, "u", [], False),  # the content is a float
        ({"role": "user", "urgent": True}, "u", [(0, "urgent", True, False)], True),  # no content: a flag
        ({"role": "user", "metadata": {"vip": False}}, "u", [(0, "vip", False, True)], True),
        ({"role": "user", "content": None}, "u", [], True),
        ({"role": "tool", "content": [{"text": "a", "n": 1e5}]}, ".", [], False),  # a float in a content part
        ({"role": "tool", "tool_call_id": "c", "name": "pay", "content": "ok"}, ".", [], True),  # four texts
        ({"role": "tool", "tool_call_id": 1.5, "name": "pay", "content": "ok"}, ".", [], False),
        ({"role": "tool", "tool_call_id": "c", "name": "pay", "content": 1e5}, ".", [], False),
        ({"role": "tool", "tool_call_id": "c", "score": 0.5, "content": "ok"}, ".", [], False),  # no name
        ({"role": "tool", "tool_call_id": "c", "name": "pay", "content": "ok", "error": True}, ".", [], True),
    ])
    def test_any_other_such_message_is_looked_into(self, message, roles, flags, no_float):
        walked = walk_messages([message], {}, None)
        assert walked.view[0] == roles and walked.view[3] == flags and walked.no_float is no_float


_CALLS = [{"id": "c", "type": "function", "function": {"name": "pay", "arguments": "{}"}}]


class TestAssistantCalls:
    """An assistant message of exactly its role, its text (or null) and its calls is not looked into value by
    value: only its calls are, for a float."""

    @pytest.mark.parametrize("message, no_float", [
        ({"role": "assistant", "content": None, "tool_calls": _CALLS}, True),
        ({"role": "assistant", "content": "paying", "tool_calls": _CALLS}, True),
        ({"role": "assistant", "tool_calls": _CALLS, "score": 1e5}, False),  # no content: the third value a float
        ({"role": "assistant", "content": 2.5, "tool_calls": _CALLS}, False),  # the content a float
        ({"role": "assistant", "content": None, "tool_calls": [{**_CALLS[0], "id": -0.0}]}, False),  # in a call
        ({"role": "assistant", "content": None, "tool_calls": _CALLS, "w": 0.1}, False),  # a fourth value
    ])
    def test_the_float_verdict(self, message, no_float):
        walked = walk_messages([message], {}, None)
        assert walked.view[0] == "a" and walked.no_float is no_float
        assert walked.calls == [{"name": "pay", "args_json": "{}", "args_raw": None, "parse_error": None}]

    @pytest.mark.parametrize("call, no_float", [
        ({"name": "pay", "args": "{}"}, True),  # a flat call of text values
        ({"name": "pay", "args": "{}", "n": 1e5}, False),
        ({"id": "c", "type": 1.5, "function": {"name": "pay", "arguments": "{}"}}, False),
        ({"id": "c", "function": {"name": "pay", "arguments": "{}"}, "w": 0.5}, False),  # no type: a float instead
        ({"id": "c", "type": "function", "function": {"name": "pay", "arguments": "{}", "strict": -0.0}}, False),
        ({"id": "c", "type": "function", "function": {"name": "pay", "arguments": {"a": 1.5}}}, False),
        ({"id": "c", "type": "function", "function": {"name": "pay", "arguments": {"a": 1}}}, True),
        ({"id": None, "type": "function", "function": {"name": "pay", "arguments": "{}"}}, True),
    ])
    def test_the_float_verdict_of_each_call(self, call, no_float):
        for content in (None, "paying"):
            walked = walk_messages([{"role": "assistant", "content": content, "tool_calls": [call, _CALLS[0]]}], {},
                                   None)
            assert walked.no_float is no_float and [record["name"] for record in walked.calls] == ["pay", "pay"]


def test_a_plain_shaped_line_is_plain():
    line = _read_trace_bytes(1, b'{"case_id": "c", "trial": 0, "messages": [{"role": "user", "content": "x"}]}')
    assert plain_trace_shape(line.data) is True
    assert line_problem(None, line, ("c", 0)) == (None, True)  # type: ignore[arg-type]


@pytest.mark.parametrize("lists, read", [(198, True), (199, False), (250, False)])
def test_argument_text_nested_past_the_limit_is_left_to_the_strict_reading(lists, read):
    # the object and its lists: 199 opening brackets in all are read at once; from 200 on the text is left to the
    # strict reading (which reads 200 levels and refuses 201)
    raw = '{"a":' + "[" * lists + "]" * lists + "}"
    assert (compact_arguments(raw) is not None) is read
    assert (float_arguments(raw) is not None) is read


def test_short_argument_text_is_read_at_once():
    assert compact_arguments('{"unit": "weekly", "n": [1, {"m": []}]}') == (
        {"unit": "weekly", "n": [1, {"m": []}]}, '{"n":[1,{"m":[]}],"unit":"weekly"}')


def test_brackets_inside_text_count_too():
    # 200 opening brackets (the object's and 199 inside a string) in 207 characters: counted, so left to the strict
    # reading, as a text of as many brackets always was (the count does not tell strings apart)
    raw = '{"a":"' + "[" * 199 + '"}'
    assert len(raw) == 207 and compact_arguments(raw) is None
    assert compact_arguments('{"a":"' + "[" * 198 + '"}') == ({"a": "[" * 198}, '{"a":"' + "[" * 198 + '"}')
