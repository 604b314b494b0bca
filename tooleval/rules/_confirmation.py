"""Detecting an explicit user confirmation before a protected call (tool spec ``requires_confirmation``).

The rule: each call of a tool that requires confirmation must be preceded, *since the agent's last
proposal*, by an explicit user confirmation. The agent's last proposal is the last assistant message with text at
or before the call's own message (an assistant text is what the user is asked to confirm; a call whose own
message carries text was proposed and executed in one breath, so nothing can confirm it). The user's reply is the
last user message after that proposal and before the call; there is none when the agent proposed and acted
without waiting.

A **structured signal beats words** where the trace has one (a button or a flag cannot be misread), declared in
gate.toml's ``[policy.confirmation]``: ``signal_tool`` names a tool whose successful call since the last proposal
confirms (a confirmation dialog, a "confirm" button wired as a tool); ``signal_metadata`` names a key that, on the
user's reply (top level of the message or under its ``metadata``), holds ``true`` (confirmed) or ``false`` (refused).

Otherwise the default detector (:class:`KeywordConfirmation`) reads the reply with
:func:`tooleval.rules._replies.read_reply`: clause by clause, the last affirmative decides unless a refusal or a
deferral follows it; an ambiguous reply is ``unclear`` (a ``missing_confirmation`` whose detail says so).
tau-bench's airline policy asks for an explicit "yes" before any write (``../shared/data/README.md``). Every word
list is configurable (:class:`ConfirmationConfig`), and any callable with the :class:`ConfirmationDetector`
signature can replace the detector.
"""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tooleval.rules._replies import (
    DEFAULT_AFFIRMATIVES,
    DEFAULT_CONDITIONS,
    DEFAULT_DEFERRALS,
    DEFAULT_HEDGES,
    DEFAULT_NEGATIONS,
    DEFAULT_NOT_AFFIRMATIVE,
    DEFAULT_REFUSALS,
    ReplyVerdict,
    reply_reader,
    words,
)
from tooleval.capture import Transcript

__all__ = [
    "ConfirmationDetector",
    "ConfirmationConfig",
    "KeywordConfirmation",
    "user_reply_since_proposal",
    "reply_since_proposal",
    "confirmation_verdict",
    "DEFAULT_AFFIRMATIVES",
    "DEFAULT_NEGATIONS",
    "DEFAULT_NOT_AFFIRMATIVE",
    "words",
]

NEGATION_WINDOW_GONE = (
    "negation_window was removed (a fixed window of words read negations across clause breaks): a negation now "
    "cancels an affirmative anywhere before it in the same "
    "clause, and never across a clause break (docs/rules.md 'Confirmation'); delete the key."
)


def _lists(value: tuple[str, ...]):
    return Field(default_factory=lambda: list(value))


class ConfirmationConfig(BaseModel):
    """``[policy.confirmation]`` in gate.toml: the structured signals and the default detector's word lists."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    affirmatives: list[str] = _lists(DEFAULT_AFFIRMATIVES)
    negations: list[str] = _lists(DEFAULT_NEGATIONS)
    not_affirmative: list[str] = _lists(DEFAULT_NOT_AFFIRMATIVE)
    deferrals: list[str] = _lists(DEFAULT_DEFERRALS)
    refusals: list[str] = _lists(DEFAULT_REFUSALS)
    hedges: list[str] = _lists(DEFAULT_HEDGES)
    conditions: list[str] = _lists(DEFAULT_CONDITIONS)
    signal_tool: str | None = None
    """A tool whose call since the agent's last proposal (with a result not starting ``Error:``) confirms."""
    signal_metadata: str | None = None
    """A key of the user's reply (top level or under ``metadata``): ``true`` confirms, ``false`` refuses."""

    @model_validator(mode="before")
    @classmethod
    def _no_negation_window(cls, data: Any) -> Any:
        if isinstance(data, dict) and "negation_window" in data:
            raise ValueError(NEGATION_WINDOW_GONE)
        return data

    def word_lists(self) -> dict[str, tuple[str, ...]]:
        """The lists by name, as :func:`tooleval.rules._replies.read_reply` takes them."""
        names = ("affirmatives", "negations", "not_affirmative", "deferrals", "refusals", "hedges", "conditions")
        return {name: tuple(getattr(self, name)) for name in names}


class ConfirmationDetector(Protocol):
    """Decides whether the call made by ``messages[call_message_index]`` was confirmed by the user: ``True`` /
    ``False``, or a verdict (``"confirmed"``, ``"refused"``, ``"unclear"``, ``"silent"``)."""

    def __call__(self, messages: list[dict[str, Any]], call_message_index: int) -> bool | str: ...


def user_reply_since_proposal(messages: list[dict[str, Any]], call_message_index: int) -> tuple[int, str] | None:
    """``(index, text)`` of the user's last message since the agent's last proposal before a call, or ``None``."""
    return reply_since_proposal(Transcript.of_messages(messages), call_message_index)


def reply_since_proposal(transcript: Transcript, call_message_index: int) -> tuple[int, str] | None:
    """:func:`user_reply_since_proposal` of a transcript view."""
    index = transcript.user_reply(call_message_index)
    return None if index is None else (index, transcript.texts[index])


class KeywordConfirmation:
    """The default detector: structured signals first, then the words of the user's reply since the agent's
    last proposal."""

    def __init__(self, config: ConfirmationConfig | None = None) -> None:
        self.config = config or ConfirmationConfig()
        self._lists = self.config.word_lists()
        self._read = reply_reader(self._lists)  # the lists are this detector's own and never change

    def read(self, text: str) -> ReplyVerdict:
        """The verdict of one user message's words (:func:`tooleval.rules._replies.read_reply`)."""
        return self._read(text)

    def is_affirmative(self, text: str) -> bool:
        """Whether one user message confirms by its words."""
        return self.read(text) == "confirmed"

    def __call__(self, messages: list[dict[str, Any]], call_message_index: int) -> ReplyVerdict:
        return self.verdict_of(Transcript.of_messages(messages), call_message_index)

    def verdict_of(self, transcript: Transcript, call_message_index: int) -> ReplyVerdict:
        """The verdict on the call made by message ``call_message_index`` of a transcript view."""
        cfg = self.config
        if cfg.signal_tool and transcript.signal_tool_called(call_message_index, cfg.signal_tool):
            return "confirmed"
        index = transcript.user_reply(call_message_index)
        if index is None:
            return "silent"
        if cfg.signal_metadata:
            signal = transcript.metadata_signal(index, cfg.signal_metadata)
            if signal is not None:
                return "confirmed" if signal else "refused"
        return self.read(transcript.texts[index])


def confirmation_verdict(detector: ConfirmationDetector, messages: list[dict[str, Any]] | None,
                         call_message_index: int, transcript: Transcript | None = None) -> ReplyVerdict:
    """A detector's answer as a verdict (``True`` -> ``"confirmed"``, ``False`` -> ``"refused"``).

    The default detector reads ``transcript`` when given (the scoring stage has the view, not the messages); any
    other detector is called with ``messages``.

    Raises:
        TypeError: a detector of its own is given no ``messages``.
    """
    if transcript is not None and type(detector).__call__ is KeywordConfirmation.__call__:
        return detector.verdict_of(transcript, call_message_index)  # type: ignore[attr-defined]
    if messages is None:
        raise TypeError("a confirmation detector of its own reads the chat messages: pass them")
    answer = detector(messages, call_message_index)
    if answer is True:
        return "confirmed"
    if answer is False:
        return "refused"
    return answer  # type: ignore[return-value]
