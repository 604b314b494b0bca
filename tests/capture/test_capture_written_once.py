"""What trace capture reads of a long line or a redacted trace without writing or reading it again: the colon
count of a long line (counted with numpy), the redaction's name screen (the name found last tried first) and the
messages' writing that redaction made part by part (taken by the envelope as its ``messages_json``)."""

from __future__ import annotations

import json

import orjson

from tooleval.capture.recorded import _colons, _fast_object_written, _read_trace_bytes
from tooleval.capture.redaction import RedactionConfig, Redactor

SYSTEM = {"role": "system", "content": "Each user has a profile with an email and a phone. " + "Be brief. " * 500}


def _redactor(seed: list | None = None) -> Redactor:
    redactor = Redactor(RedactionConfig(), b"k" * 32)
    redactor.seed(seed or [])
    return redactor


class TestLongLines:
    def test_colons_are_counted_as_bytes_count_counts_them(self):
        text = ('{"a":"x:y","b":[1,2,{"c":":"}]}' * 300).encode()  # 9,300 bytes: past the numpy threshold
        assert len(text) > 4096
        assert _colons(text) == 300 * 5

    def test_a_long_line_that_repeats_a_key_is_left_to_the_strict_reading(self):
        # orjson keeps the last of two equal keys, so its writing holds one colon fewer than the line
        filler = "x" * 5000
        repeated = f'{{"case_id":"c","trial":0,"note":"{filler}","messages":[],"messages":[]}}'.encode()
        once = f'{{"case_id":"c","trial":0,"note":"{filler}","messages":[]}}'.encode()
        assert _fast_object_written(repeated) is None
        value, written = _fast_object_written(once)
        assert value == json.loads(once) and written.count(b":") == once.count(b":") == 4


class TestNameScreen:
    def test_the_name_found_last_does_not_hide_another(self):
        redactor = _redactor()
        long = "word " * 1000  # past the length from which names are looked for in the bytes
        email = orjson.dumps({"messages": [{"role": "user", "content": f"my email {long}"}]})
        phone = orjson.dumps({"messages": [{"role": "user", "content": f"my phone {long}"}]})
        neither = orjson.dumps({"messages": [{"role": "user", "content": f"my name {long}"}]})
        # the screen itself (untouched_text would find a name it missed in its later, slower look)
        assert redactor._names_in(email) is True
        assert redactor._names_in(phone) is True  # tried after email, which it does not hold
        assert redactor._names_in(email) is True
        assert redactor._names_in(neither) is False
        assert redactor.untouched_text(phone) is False
        assert redactor.untouched_text(neither) is True


class TestMessagesWritten:
    def _trace(self, trial: int, address: str) -> dict:
        line = json.dumps({"case_id": "c1", "trial": trial, "messages": [
            SYSTEM, {"role": "user", "content": "hello"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "1", "type": "function", "function": {"name": "lookup",
                                                             "arguments": json.dumps({"email": address})}}]},
            {"role": "tool", "tool_call_id": "1", "content": json.dumps({"email": address, "phone": "555-0100"})},
        ], "metadata": {"reward": 1.0}}).encode()
        return _read_trace_bytes(1, line).data

    def test_the_writing_is_the_redacted_messages_writing(self):
        redactor = _redactor()
        for trial, address in enumerate(["a@x.example", "b@x.example", "a@x.example"]):
            written: dict[str, bytes] = {}
            trace = self._trace(trial, address)
            redacted = redactor.redact_trace_values(trace, None, written=written)
            assert address not in written["messages"].decode()
            assert written["messages"] == orjson.dumps(redacted["messages"])
            assert redacted == _redactor().redact_trace(self._trace(trial, address))

    def test_a_trace_judged_whole_writes_nothing(self):
        redactor = _redactor()
        written: dict[str, bytes] = {}
        trace = {"case_id": "c1", "trial": 0, "messages": [{"role": "user", "content": "hello"}]}
        assert redactor.redact_trace_values(trace, None, written=written) == {**trace, "redacted_fields": []}
        assert written == {}
