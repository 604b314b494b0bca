"""The fast paths of issue 9 ("less work per row") give exactly what the reference definitions give.

* :func:`tooleval.canonical.parse_arguments` reads integral floats as ints while parsing and skips the
  ``json_value_problem`` walk when the text alone proves there is nothing to find; the reference is the reading it
  replaced: ``strict_json_loads(unique_keys=True)``, then ``json_value_problem``, then ``canonical_value``.
* :func:`tooleval.canonical.canonical_loads` equals ``canonical_value(json.loads(text))``.
* :meth:`tooleval.models.Call.from_raw` pre-fills ``args_json``: it equals ``canonical_json(args)``; and
  :meth:`tooleval.models.Call.from_canonical` reads that text back to the same call.
* The envelope digest reads its JSON-text columns with ``canonical_loads``: a digest pinned before the change still
  comes out (computed by hand from the formula below).
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.profiles import examples
from tooleval.canonical import (MAX_DEPTH, canonical_json, canonical_loads, canonical_value, json_value_problem,
                                loads_text, may_hold_wide_integer,
                                parse_arguments, strict_json_loads)
from tooleval.capture.envelope import envelope_digest
from tooleval.models import Call, ToolSpec
from tooleval.rules import ToolTable
from tooleval.rules._tools import confidential_fields, ruled_tools


def json_values(finite: bool, max_leaves: int):
    """Nested JSON-like values: scalars (floats finite or not) in lists and objects."""
    return st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=not finite, allow_infinity=not finite)
        | st.text(max_size=8),
        lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4),
        max_leaves=max_leaves,
    )


def reference_parse(raw: str) -> tuple[dict | None, str | None]:
    """parse_arguments for text as it read before issue 9's fast path (tooleval 0.1.0 at commit c502cab)."""
    if raw.strip() == "":
        return {}, None
    try:
        parsed = strict_json_loads(raw, unique_keys=True)
    except RecursionError:
        return None, f"invalid JSON: nested deeper than {MAX_DEPTH} levels"
    except ValueError as exc:
        return None, f"invalid JSON: {exc}"
    if parsed is None:
        return {}, None
    if not isinstance(parsed, dict):
        return None, f"not a JSON object: {type(parsed).__name__}"
    problem = json_value_problem(parsed)
    if problem is not None:
        return None, f"not representable: {problem}"
    return canonical_value(parsed), None


def same(a, b) -> bool:
    """Equal including types (``1 == 1.0`` and ``True == 1`` in Python; not here)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True) and repr(a) == repr(b)


EDGE_TEXTS = [
    '{"amount": 250.0}', '{"amount": -0.0}', '{"amount": 1E2}', '{"amount": 2.5e-3}', '{"a": 1e308}',
    '{"a": 1e999}', '{"a": -1e999}', '{"a": NaN}', '{"a": Infinity}', '{"a": -Infinity}',
    '{"amount": 1, "amount": 49.99}', '{"a": {"b": 1, "b": 2}}', '{"a": "\\ud800"}', '{"\\udc00": 1}',
    '{"a": "\\ud83d\\ude00"}', '{"a": "\\\\ud800"}', '{"a": "\ud800"}', '[1, 2]', '"text"', '10', 'null', '',
    '   ', '{', '{"a": true, "b": 1}', '{"a": [1.0, 2.50, {"c": 3.0}]}', '{"é": "ü", "a": "日本"}',
    '{"big": 123456789012345678901234567890}', '{"x": 1.0000000000000002}',
    '{"deep": ' + '[' * (MAX_DEPTH + 5) + ']' * (MAX_DEPTH + 5) + '}',
    '{"deep": ' + '[' * (MAX_DEPTH - 2) + ']' * (MAX_DEPTH - 2) + '}',
    '{"s": "' + '{' * (MAX_DEPTH + 1) + '"}', '\ufeff{"a": 1}', ' {"a": 1} ', '{"a": 1} x',
]


class TestParseArgumentsFastPath:
    @pytest.mark.parametrize("text", EDGE_TEXTS)
    def test_edge_texts_read_as_before(self, text):
        args, error = parse_arguments(text)
        ref_args, ref_error = reference_parse(text)
        assert error == ref_error
        assert same(args, ref_args)

    def test_integral_floats_become_ints_while_parsing(self):
        args, _ = parse_arguments('{"a": 250.0, "b": [1.5, -0.0], "c": 1E2}')
        assert args == {"a": 250, "b": [1.5, 0], "c": 100}
        assert [type(args["a"]), type(args["b"][0]), type(args["b"][1]), type(args["c"])] == [int, float, int, int]

    @settings(max_examples=examples(300), deadline=None)
    @given(json_values(finite=False, max_leaves=20))
    def test_generated_objects_read_as_before(self, value):
        text = json.dumps({"v": value})  # NaN/Infinity written as Python writes them: both readers refuse them
        args, error = parse_arguments(text)
        ref_args, ref_error = reference_parse(text)
        assert error == ref_error
        assert same(args, ref_args)
        if error is None:
            call = Call.from_raw("tool", text)
            assert call.args_json == canonical_json(ref_args)
            assert call == Call(name="tool", args=ref_args)
            assert call.key == Call(name="tool", args=ref_args).key
            # what scoring reads back from a verified envelope, against the general reading of the stored record
            carried, read = Call.from_canonical("tool", call.args_json), Call.from_record(call.to_record())
            assert carried == read == call and carried.args_json == read.args_json == call.args_json
            assert same(carried.args, read.args)  # key order included (canonical text: sorted keys)


class TestCanonicalLoads:
    @settings(max_examples=examples(300), deadline=None)
    @given(json_values(finite=True, max_leaves=30))
    def test_equals_canonical_value_of_json_loads(self, value):
        text = json.dumps(value, ensure_ascii=False)
        assert same(canonical_loads(text), canonical_value(json.loads(text)))
        assert canonical_json(json.loads(text)) == json.dumps(canonical_loads(text), sort_keys=True,
                                                               separators=(",", ":"), ensure_ascii=False)

    @pytest.mark.parametrize("text", ['[NaN]', '{"a": Infinity}', '[1e999]'])
    def test_refuses_what_canonical_value_refuses(self, text):
        with pytest.raises(ValueError):
            canonical_value(json.loads(text))
        with pytest.raises(ValueError):
            canonical_loads(text)


class TestEnvelopeDigest:
    def test_digest_formula_unchanged(self):
        captured = datetime(2024, 5, 15, 15, 0, tzinfo=timezone.utc)
        record = {
            "envelope_version": 2, "dataset_revision": "r1", "run_id": None, "case_id": "c", "trial": 0,
            "agent_name": "a", "agent_version": None, "agent_model": None, "request_id": None, "response_id": None,
            "messages_json": json.dumps([{"role": "assistant", "content": "x", "n": 250.0, "m": -0.0}]),
            "model_calls": [{"name": "t", "args_json": '{"a":1}', "args_raw": None, "parse_error": None}],
            "metadata_json": json.dumps({"reward": 1.0}), "captured_at": captured, "trace_digest": None,
            "error": None, "request_messages_json": None, "adapter_calls": None, "executor_calls": None,
            "prompt_version": None, "tool_schema_version": None, "generation_started_at": captured,
            "generation_finished_at": None, "redacted_fields": [],
        }
        # the formula as written before issue 9: canonical JSON of every content column, JSON texts parsed
        content = {k: v for k, v in record.items() if k not in {"run_id", "captured_at", "trace_digest", "error"}}
        content["messages_json"] = json.loads(content["messages_json"])
        content["metadata_json"] = json.loads(content["metadata_json"])
        content["generation_started_at"] = "2024-05-15T15:00:00.000000+00:00"
        expected = hashlib.sha256(json.dumps(canonical_value(content), sort_keys=True, separators=(",", ":"),
                                             ensure_ascii=False).encode()).hexdigest()
        assert envelope_digest(record) == expected


class TestToolTable:
    def test_summaries_equal_a_scan_of_a_plain_dict(self):
        tools = [ToolSpec(name="pay", argument_rules={"amount": {"tolerance": 0.01}}),
                 ToolSpec(name="user", confidential_fields=["ssn"]), ToolSpec(name="search")]
        table = ToolTable(tools)
        plain = {tool.name: tool for tool in tools}
        assert table == plain
        assert ruled_tools(table) == ruled_tools(plain) == frozenset({"pay"})
        assert confidential_fields(table) == confidential_fields(plain) == {"user": ["ssn"]}


class TestWellFormedCall:
    """A call built from checked values (``from_raw`` of good text, ``from_canonical``) is the call pydantic
    validation builds from the same name and arguments: every field, the set fields, equality and the key."""

    @settings(max_examples=examples(100), deadline=None)
    @given(st.dictionaries(st.text(max_size=5), st.one_of(st.integers(), st.text(max_size=5), st.none()),
                           max_size=4))
    def test_alike_to_the_validated_call(self, args):
        validated = Call.model_validate({"name": "refund", "args": args})
        for built in (Call.from_raw("refund", json.dumps(args)), Call.from_canonical("refund", canonical_json(args))):
            assert built == validated and built.key == validated.key
            assert built.model_dump() == validated.model_dump()
            assert built.model_fields_set == {"name", "args"}
            # every declared field is set: a field added to Call must be added to the fast constructor too
            assert set(Call.model_fields) <= set(vars(built))


class TestStageTextReader:
    """``loads_text`` (stage payloads, envelope columns) reads what ``json.loads`` reads, to the same value —
    integers beyond 64 bits included, which orjson alone reads as floats (2**70 came back as 1.18e21)."""

    def test_wide_integers_keep_their_value(self):
        for value in (2 ** 64, 2 ** 70, -(2 ** 63) - 1, [1, {"a": 10 ** 30}]):
            text = json.dumps({"metadata": value})
            assert loads_text(text) == loads_text(text.encode()) == {"metadata": value}
            assert may_hold_wide_integer(text.encode())
        # the widest integers orjson reads exactly (20 and 19 digits) and a long id in a string: any answer is
        # right for them, the value is what counts
        for value in (2 ** 64 - 1, -(2 ** 63), "12345678901234567890123"):
            assert loads_text(json.dumps([value])) == [value]
        assert not may_hold_wide_integer(b'{"id": 123456789012345678, "x": 1.5}')  # 18 digits: orjson's reading

    @settings(max_examples=examples(100), deadline=None)
    @given(json_values(finite=True, max_leaves=30))
    def test_equal_to_the_standard_library(self, value):
        text = json.dumps(value)
        read = loads_text(text)
        assert read == json.loads(text)
        assert json.dumps(read) == text  # same types too: an int stays an int


class TestFloatScreen:
    """The envelope digest's screen for float tokens (digits and minus signs deleted, one substring search) answers exactly as
    the float-token expression does: it may only send more texts to the expression, never miss a float."""

    @settings(max_examples=examples(300), deadline=None)
    @given(st.recursive(
        st.none() | st.integers(min_value=-(2 ** 63), max_value=2 ** 64 - 1)
        | st.floats(allow_nan=False, allow_infinity=False) | st.text(alphabet="0123456789:,[]-.eEx ", max_size=8),
        lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(alphabet="e:1,", max_size=3),
                                                                           children, max_size=4),
        max_leaves=20,
    ))
    def test_equal_to_the_expression(self, value):
        from tooleval.canonical import _FLOAT_TOKEN, may_hold_float as _may_hold_float

        data = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        assert _may_hold_float(data) == (_FLOAT_TOKEN.search(data) is not None)

    def test_by_hand(self):
        from tooleval.canonical import may_hold_float as _may_hold_float

        assert _may_hold_float(b'{"a":-12.5}') and _may_hold_float(b"[1e5]") and _may_hold_float(b'{"a":[0,3E-2]}')
        # a redaction token's hex after its colon (even one that reads as an exponent, 11e5b8), integers, a time
        # that ends a sentence: no float token; text ending like a float inside an array looks like one (such a
        # text only takes the slow way)
        assert not _may_hold_float(b'{"a":"<redacted:e5f0a1>","n":[1,-2,30],"t":"at 15h","r":"redacted:11e5b8"}')
        assert not _may_hold_float(b'{"t":"at 15:00."}') and not _may_hold_float(b'{"t":"at 15:00.5 am"}')
        assert _may_hold_float(b'{"t":"a:1.5]"}') and _may_hold_float(b'[1.5]') and _may_hold_float(b'{"a":1e5}')


def compact_texts():
    """Argument texts as orjson writes them (what the compact-object reading takes) and as the standard library
    writes them with spaces (what it leaves to the strict reading)."""
    def orjson_text(value) -> str:
        try:
            return orjson.dumps(value).decode()
        except orjson.JSONEncodeError:  # an integer beyond 64 bits, a lone surrogate: written compact anyway
            return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    objects = st.dictionaries(st.text(max_size=5), json_values(finite=True, max_leaves=15), max_size=5)
    return st.one_of(objects.map(orjson_text), objects.map(json.dumps),
                     objects.map(lambda v: json.dumps(v, ensure_ascii=False, separators=(",", ":"))))


class TestCompactArguments:
    """Argument text exactly as orjson writes it is read by orjson; every such text reads as the strict reading
    (the reference of issue 9's tests) reads it, and each guard of that reading has a text that needs it."""

    @settings(max_examples=examples(300), deadline=None)
    @given(compact_texts())
    def test_reads_as_the_strict_reading(self, text):
        args, error = parse_arguments(text)
        ref_args, ref_error = reference_parse(text)
        assert error == ref_error
        assert same(args, ref_args)

    @settings(max_examples=examples(300), deadline=None)
    @given(compact_texts())
    def test_calls_as_the_strict_reading(self, text):
        call = Call.from_raw("tool", text)
        ref_args, ref_error = reference_parse(text)
        assert call.parse_error == ref_error
        if ref_error is None:
            assert same(call.args, ref_args) and call.args_json == canonical_json(ref_args)
            assert call == Call(name="tool", args=ref_args) and call.key == Call(name="tool", args=ref_args).key

    def test_taken_for_compact_text(self):
        from tooleval.canonical import _compact_object

        assert _compact_object('{"user_id":"mia_li_3668","n":[1,{"b":null}]}') == {"user_id": "mia_li_3668",
                                                                                   "n": [1, {"b": None}]}
        assert _compact_object('{"user_id": "mia_li_3668"}') == {"user_id": "mia_li_3668"}  # spaces: checked
        assert _compact_object('{"a": 1, "a": 2}') is None and _compact_object('{"a": 2.0}') is None

    @pytest.mark.parametrize("text, args, error", [
        ('{"a":1,"a":2}', None, "invalid JSON: duplicate key 'a'"),  # orjson keeps the last value
        ('{"a":{"b":1,"b":1}}', None, "invalid JSON: duplicate key 'b'"),
        ('{"a":250.0,"b":[1.5,-0.0]}', {"a": 250, "b": [1.5, 0]}, None),  # integral floats become ints
        ('{"a":123456789012345678901234}', {"a": 123456789012345678901234}, None),  # orjson: a float
        # the same guards for text with the standard library's spaces (bfcl's argument texts)
        ('{"a": 1, "a": 2}', None, "invalid JSON: duplicate key 'a'"),
        ('{"a": 250.0, "b": [1E2]}', {"a": 250, "b": [100]}, None),
        ('{"a": 123456789012345678901234}', {"a": 123456789012345678901234}, None),
        # a dropped member's colon made up by a colon spelled as an escape: the colon counts agree (2 and 2)
        ('{"k": 1, "k": "\\u003a"}', None, "invalid JSON: duplicate key 'k'"),
    ])
    def test_guards(self, text, args, error):
        got, got_error = parse_arguments(text)
        assert got_error == error and same(got, args)

    def test_nesting_beyond_the_bound(self):
        # 250 objects deep: orjson reads up to 1,024 levels; the strict reading refuses more than 200
        text = '{"a":' * 250 + "1" + "}" * 250
        args, error = parse_arguments(text)
        assert args is None and error.startswith("not representable: a.a.a") and error.endswith(
            "nested deeper than 200 levels")


class TestCanonicalText:
    """``canonical_dumps`` and ``canonical_text`` write with orjson where its bytes are the standard library's
    canonical bytes; equal to the reference (``json.dumps(canonical_value(v), sort_keys=True, separators=(",",
    ":"), ensure_ascii=False)``) for every finite JSON value."""

    @staticmethod
    def reference(value) -> str:
        return json.dumps(canonical_value(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    @settings(max_examples=examples(300), deadline=None)
    @given(json_values(finite=True, max_leaves=30))
    def test_equal_to_the_reference(self, value):
        from tooleval.canonical import canonical_dumps, canonical_text

        assert canonical_text(value) == canonical_json(value) == self.reference(value)
        assert canonical_dumps(canonical_value(value)) == self.reference(value)

    @settings(max_examples=examples(300), deadline=None)
    @given(st.recursive(
        st.none() | st.booleans() | st.integers(min_value=-(2 ** 63), max_value=2 ** 64 - 1)
        | st.floats(allow_nan=False, allow_infinity=False) | st.text(alphabet="0123456789:,[]-.eE\"{} ", max_size=10),
        lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(alphabet="ae:1", max_size=3),
                                                                           children, max_size=4),
        max_leaves=20,
    ))
    def test_float_tokens_in_strings(self, value):
        # strings that look like floats to the text screen (an argument text "{\"a\":1.5}" in a message): the
        # walk over the value decides, and only a real float takes the standard library's way
        from tooleval.canonical import canonical_text

        assert canonical_text(value) == self.reference(value)

    @settings(max_examples=examples(300), deadline=None)
    @given(json_values(finite=True, max_leaves=30))
    def test_equal_to_the_reference_when_walked_first(self, value):
        # a long value is walked for floats before its text is screened: the same text for every value
        from unittest import mock

        from tooleval import canonical

        with mock.patch.object(canonical, "_WALK_FROM", 0):
            assert canonical.canonical_text(value) == self.reference(value)
            assert canonical.canonical_dumps(canonical_value(value)) == self.reference(value)

    def test_float_token_in_a_string_by_hand(self):
        from tooleval.canonical import orjson_canonical

        assert orjson_canonical({"b": '{"a":1.5}', "a": [1, "x:2.0]"]}) == '{"a":[1,"x:2.0]"],"b":"{\\"a\\":1.5}"}'
        assert orjson_canonical({"b": '{"a":1.5}', "a": [250.0]}) is None  # a real float: the standard library

    @settings(max_examples=examples(300), deadline=None)
    @given(st.lists(st.floats(allow_nan=False, allow_infinity=False), max_size=6))
    def test_floats(self, value):
        from tooleval.canonical import canonical_text

        assert canonical_text(value) == self.reference(value)
        assert canonical_text({"a": value}) == self.reference({"a": value})

    @pytest.mark.parametrize("value, text", [
        ([1e-07, 2.5e-05, 1.5e16], "[1e-07,2.5e-05,15000000000000000]"),  # orjson writes 1e-7, 0.000025; 1.5e16 is integral
        ({"b": 250.0, "a": -0.0}, '{"a":0,"b":250}'),  # integral floats are ints in canonical text
        ({"é": "日本", "a": "\u2028\x7f\x00"}, '{"a":"\u2028\x7f\\u0000","é":"日本"}'),
        (5.0, "5"), (0.5, "0.5"),  # a number on its own: no separator before it
        ([2 ** 70], "[1180591620717411303424]"),  # beyond orjson's 64 bits
        (["\ud800"], '["\ud800"]'),  # a lone surrogate: orjson refuses it, the standard library writes it
    ])
    def test_by_hand(self, value, text):
        from tooleval.canonical import canonical_text

        assert canonical_text(value) == text == self.reference(value)

    def test_canonical_loads_of_spaced_and_top_level_floats(self):
        # the float screen of text from outside allows spaces after a separator; a top-level number is read
        # the standard library's way
        assert same(canonical_loads('{"a": 5.0, "b": [ 1.0]}'), {"a": 5, "b": [1]})
        assert same(canonical_loads("5.0"), 5) and same(canonical_loads(" [2.0]"), [2])
        assert canonical_loads('[123456789012345678901]') == [123456789012345678901]


class TestCanonicalTextReadBack:
    """Canonical text this package wrote is read by orjson (``loads_canonical_text``, what scoring reads a verified
    envelope's call arguments with) to the value ``canonical_loads`` reads, types included."""

    @settings(max_examples=examples(300), deadline=None)
    @given(json_values(finite=True, max_leaves=30))
    def test_equal_to_canonical_loads(self, value):
        from tooleval.canonical import loads_canonical_text

        text = canonical_json(value)
        assert same(loads_canonical_text(text), canonical_loads(text))

    def test_wide_integers(self):
        from tooleval.canonical import loads_canonical_text

        # orjson alone reads 2**70 as the float 1.1805916207174113e+21
        assert same(loads_canonical_text(canonical_json({"a": 2 ** 70})), {"a": 2 ** 70})
