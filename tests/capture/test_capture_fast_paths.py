"""Trace capture's fast paths give exactly what the paths they replace give.

* :func:`tooleval.models.call_records_from_messages` (call records without a :class:`~tooleval.models.Call` per
  compact call) equals ``[call.to_record() for call in calls_from_messages(messages)]``, errors included.
* One walk over a trace's messages (:func:`tooleval.capture._walk.walk_messages`) equals the call records, the
  transcript view and :func:`tooleval.canonical.holds_no_float`, each from its own walk; and
  :func:`tooleval.canonical.float_arguments` equals :meth:`~tooleval.models.Call.from_raw` for argument text with
  floats.
* The capture's reading of a payload (:func:`tooleval.capture.envelope._recorded_trace`: a message list of plain
  objects taken as it is) equals ``RecordedTrace.model_validate``, refusals included.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from tests.support.profiles import examples
from tooleval.canonical import float_arguments, holds_no_float
from tooleval.capture._walk import walk_messages
from tooleval.capture.envelope import _recorded_trace
from tooleval.capture.transcript import transcript_values
from tooleval.models import Call, RecordedTrace, call_records_from_messages, calls_from_messages

_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                     st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([250.0, -0.0, 1e-05]),
                     st.text(max_size=6))
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                         st.dictionaries(st.text(max_size=4), inner, max_size=3)),
                       max_leaves=10)
# argument text of every spelling: orjson's compact writing, the standard library's spaces, a repeated key, text
# that is no object, no text at all (an object, null)
_ARGUMENTS = st.one_of(
    st.dictionaries(st.text(max_size=4), _VALUES, max_size=3).map(lambda v: json.dumps(v, separators=(",", ":"))),
    st.dictionaries(st.text(max_size=4), _VALUES, max_size=3).map(json.dumps),
    st.sampled_from(['{"a":1,"a":2}', '{"a": 1, "a": 2}', "[1]", "", "null", "{", '{"a":250.0}']),
    st.dictionaries(st.text(max_size=4), _VALUES, max_size=3), st.none(), st.integers())
_NAMES = st.one_of(st.text(max_size=5), st.just(None), st.integers())


def _tool_call(draw_name, arguments, shape, captured):
    if shape == "function":
        call = {"id": "c", "type": "function", "function": {"name": draw_name, "arguments": arguments}}
    elif shape == "flat":
        call = {"name": draw_name, "args": arguments}
    elif shape == "no-body":
        call = {"function": "text"}
    else:
        call = "not an object"
    if captured is not None and isinstance(call, dict):
        call["arguments_captured"] = captured
    return call


_TOOL_CALLS = st.builds(_tool_call, _NAMES, _ARGUMENTS,
                        st.sampled_from(["function", "function", "function", "flat", "no-body", "text"]),
                        st.sampled_from([None, None, None, True, False, "yes"]))
_MESSAGES = st.lists(st.one_of(
    st.builds(lambda calls: {"role": "assistant", "content": None, "tool_calls": calls},
              st.lists(_TOOL_CALLS, max_size=3)),
    st.builds(lambda text: {"role": "user", "content": text}, st.text(max_size=5)),
    st.sampled_from([{"role": "assistant", "tool_calls": None}, {"role": "assistant", "tool_calls": "abc"},
                     {"role": "tool", "tool_calls": [{"function": {"name": "x", "arguments": "{}"}}]}, "text"])),
    max_size=5)


def _outcome(read, messages):
    try:
        return read(messages)
    except ValueError as exc:
        return ("ValueError", str(exc))


class TestCallRecords:
    @settings(max_examples=examples(500), deadline=None)
    @given(_MESSAGES)
    def test_equal_to_the_records_of_the_calls(self, messages):
        reference = _outcome(lambda m: [call.to_record() for call in calls_from_messages(m)], messages)
        assert _outcome(call_records_from_messages, messages) == reference

    def test_by_hand(self):
        messages = [{"role": "assistant", "tool_calls": [
            {"function": {"name": "pay", "arguments": '{"b":2,"a":1}'}},  # compact: its canonical text
            {"function": {"name": "pay", "arguments": '{"a": 250.0}'}},  # a float: read by Call.from_raw
            {"function": {"name": "pay", "arguments": "[1]"}}]}]  # not an object: malformed
        assert call_records_from_messages(messages) == [
            {"name": "pay", "args_json": '{"a":1,"b":2}', "args_raw": None, "parse_error": None},
            {"name": "pay", "args_json": '{"a":250}', "args_raw": None, "parse_error": None},
            {"name": "pay", "args_json": None, "args_raw": "[1]", "parse_error": "not a JSON object: list"}]

    @pytest.mark.parametrize("messages, error", [
        ([{"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}],
         "messages[0].tool_calls[0] has no tool name"),
        ([{"role": "assistant", "tool_calls": [{"function": {"name": "x", "arguments": "{}"},
                                                "arguments_captured": False}]}],
         "messages[0].tool_calls[0] says arguments_captured: false but gives arguments (drop one of them)"),
        ([{"role": "assistant", "tool_calls": "ab"}], "messages[0].tool_calls[0] has no tool name"),
    ])
    def test_errors_name_the_call(self, messages, error):
        with pytest.raises(ValueError) as raised:
            call_records_from_messages(messages)
        assert str(raised.value) == error


_PAYLOADS = st.fixed_dictionaries(
    {"case_id": st.one_of(st.text(max_size=3), st.integers(0, 5)), "trial": st.one_of(st.integers(-1, 3), st.just(True)),
     "messages": st.one_of(st.lists(st.one_of(st.dictionaries(st.text(max_size=4), _VALUES, max_size=3),
                                              st.integers(), st.text(max_size=3)), max_size=3),
                           st.just("text"), st.none())},
    optional={"agent": st.one_of(st.fixed_dictionaries({"name": st.text(max_size=3)}), st.integers()),
              "metadata": st.one_of(st.none(), st.dictionaries(st.sampled_from(["reward", "x"]), _SCALARS)),
              "generation_started_at": st.sampled_from(["2026-01-01T00:00:00Z", "not a time", None]),
              "error": st.text(max_size=3), "extra": _VALUES})


class TestRecordedTrace:
    @settings(max_examples=examples(500), deadline=None)
    @given(_PAYLOADS)
    def test_equal_to_the_validation(self, payload):
        payload = json.loads(json.dumps(payload))  # as capture has it: read from JSON text
        try:
            reference = RecordedTrace.model_validate(payload)
        except ValidationError as exc:
            with pytest.raises(ValidationError) as raised:
                _recorded_trace(payload)
            assert raised.value.errors(include_context=False) == exc.errors(include_context=False)
            return
        trace = _recorded_trace(payload)
        assert trace == reference
        assert trace.model_dump() == reference.model_dump() and trace.model_extra == reference.model_extra

    def test_a_message_that_is_no_object_is_refused(self):
        with pytest.raises(ValidationError) as raised:
            _recorded_trace({"case_id": "c", "trial": 0, "messages": [{"role": "user"}, 5]})
        assert raised.value.errors()[0]["loc"] == ("messages", 1)


_PLAIN_CALLS = st.lists(st.builds(lambda call_id, name, arguments: {"id": call_id, "type": "function", "function": {
    "name": name, "arguments": arguments}}, st.sampled_from(["c", "d"]), st.sampled_from(["x", "y"]), _ARGUMENTS),
    min_size=1, max_size=3)
_WALKED = st.lists(st.one_of(
    st.builds(lambda calls: {"role": "assistant", "content": None, "tool_calls": calls}, _PLAIN_CALLS),
    st.builds(lambda calls, text: {"role": "assistant", "content": text, "tool_calls": calls},
              st.lists(_TOOL_CALLS, max_size=3), st.one_of(st.none(), st.text(max_size=8))),
    st.builds(lambda text, flag, meta: {"role": "user", "content": text, "confirmed": flag, "metadata": meta},
              st.sampled_from(["ok", "Error: no", "yes"]), st.booleans(),
              st.dictionaries(st.sampled_from(["vip", "score"]), _SCALARS, max_size=2)),
    st.builds(lambda call_id, text, error: {"role": "tool", "tool_call_id": call_id, "content": text, "error": error},
              st.sampled_from(["c", "d", None]),
              st.sampled_from(["done", "Error: declined", "  error: x", "\u3000ERROR: x", "Errors", "E"]),
              st.sampled_from([True, False, None])),
    # two values: a text message, or one whose role or content is of another type
    st.builds(lambda role, content: {"role": role, "content": content},
              st.sampled_from(["user", "assistant", "tool", 1.5, None, 1]), _SCALARS),
    st.builds(lambda value: {"role": "system", "content": "s", "extra": value}, _VALUES),
    st.sampled_from([{"role": "assistant", "tool_calls": None}, {"role": "assistant", "tool_calls": "abc"}, "text",
                     {"role": "assistant", "content": [{"type": "text", "text": "a"}, {"text": "b"}]}])),
    max_size=6)


class TestMessagesWalk:
    """:func:`tooleval.capture._walk.walk_messages` gives, in one walk, what the call records, the transcript view
    and the float screen give each in their own (or ``None``, and then the capture asks them)."""

    @settings(max_examples=examples(500), deadline=None)
    @given(_WALKED, st.sampled_from([None, frozenset({"x"}), frozenset()]))
    def test_equal_to_the_separate_walks(self, messages, kept):
        messages = json.loads(json.dumps(messages))  # as capture has them: read from JSON text
        walked = walk_messages(messages, {}, kept)
        if walked is None:
            return
        calls = call_records_from_messages(messages)
        assert walked.calls == calls
        assert walked.view == transcript_values(messages, [call["name"] for call in calls], kept)
        assert walked.no_float is holds_no_float(messages)

    def test_by_hand(self):
        messages = [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "book it", "confirmed": True, "metadata": {"vip": False}},
            {"role": "assistant", "content": "ok", "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "pay", "arguments": '{"x": 1.5}'}},
                {"id": "b", "type": "function", "function": {"name": "log", "arguments": '{"y":2}'}}]},
            {"role": "tool", "tool_call_id": "b", "content": "logged"},
            {"role": "tool", "tool_call_id": "a", "content": "Error: declined"},
            {"role": "assistant", "content": "Payment failed"}]
        walked = walk_messages(messages, {}, frozenset({"pay"}))
        assert walked.calls == [{"name": "pay", "args_json": '{"x":1.5}', "args_raw": None, "parse_error": None},
                                {"name": "log", "args_json": '{"y":2}', "args_raw": None, "parse_error": None}]
        # roles, texts, "Error:" messages, user flags (top level, then metadata), steps paired by call id (the
        # results come in the other order), no alignment error, the kept tool's result text, the written texts
        assert walked.view == (".ua..a", [None, "book it", "ok", None, None, "Payment failed"], [4],
                               [(1, "confirmed", True, False), (1, "vip", False, True)],
                               [(2, 4, True), (2, 3, False)], None, ["Error: declined", None],
                               ['{"x": 1.5}', '{"y":2}'])
        assert walked.no_float is True  # the float is inside argument text
        messages[1]["metadata"]["score"] = 0.5
        assert walk_messages(messages, {}, None).no_float is False

    def test_another_shape_is_left_to_the_separate_walks(self):
        assert walk_messages([{"role": "assistant", "tool_calls": "abc"}], {}, None) is None
        assert walk_messages(["text"], {}, None) is None
        assert walk_messages([{"role": "assistant", "tool_calls": [
            {"function": {"name": "x", "arguments": None}, "arguments_captured": False}]}], {}, None) is None


class TestFloatArguments:
    """:func:`tooleval.canonical.float_arguments` reads argument text with floats as :meth:`Call.from_raw` does."""

    @settings(max_examples=examples(500), deadline=None)
    @given(_ARGUMENTS)
    def test_equal_to_the_strict_reading(self, raw):
        if not isinstance(raw, str):
            return
        read = float_arguments(raw)
        if read is not None:
            record = Call.from_raw("t", raw).to_record()
            assert record["parse_error"] is None and read[1] == record["args_json"]

    def test_by_hand(self):
        # integral floats become ints (-0.0 too), the others keep the standard library's spelling
        assert float_arguments('{"a": 1.0, "b": [2.50, -0.0, 1e2], "c": 1E-7}') == (
            {"a": 1, "b": [2.5, 0, 100], "c": 1e-07}, '{"a":1,"b":[2.5,0,100],"c":1e-07}')
        assert float_arguments('{"a": 1.5, "a": 2.5}') is None  # a repeated key: the strict reading refuses it
        assert float_arguments('{"a": 12345678901234567890.5}') is None  # 20 digits: maybe an integer past 64 bits
        assert float_arguments('{"a": 1e999}') is None  # overflows
        assert float_arguments('[1.5]') is None  # no object
