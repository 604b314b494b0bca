"""The steps the scoring stage builds from a transcript view (:func:`tooleval.rules._trajectory.aligned_steps`) are
the steps :func:`~tooleval.rules._trajectory.trajectory` builds from the messages: the same frozen ``Step`` values,
field for field."""

from __future__ import annotations

import dataclasses

import pytest

from tooleval.capture import Transcript
from tooleval.models import Call
from tooleval.rules._trajectory import Step, aligned_steps, trajectory


def _messages() -> list[dict]:
    return [
        {"role": "user", "content": "cancel my booking"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "lookup", "arguments": '{"id": 1}'}},
            {"id": "b", "type": "function", "function": {"name": "cancel", "arguments": '{"id": 1}'}}]},
        {"role": "tool", "tool_call_id": "a", "content": "found"},
        {"role": "tool", "tool_call_id": "b", "content": "Error: not allowed"},
        {"role": "assistant", "content": "Done."},
    ]


def test_the_view_gives_the_messages_steps():
    calls = [Call.from_raw("lookup", '{"id": 1}'), Call.from_raw("cancel", '{"id": 1}')]
    transcript = Transcript.of_messages(_messages(), [call.name for call in calls])
    steps = aligned_steps(transcript, calls)
    # by hand: both calls made by message 1; their results are messages 2 and 3, the second an error
    assert steps == [Step(0, calls[0], 1, 2, False), Step(1, calls[1], 1, 3, True)]
    assert steps == trajectory(_messages(), calls)
    assert all(type(s) is Step for s in steps)
    with pytest.raises(dataclasses.FrozenInstanceError):
        steps[0].failed = True
