"""The confirmation rule on replies written by the team (issue 11 section 3): ``tests/golden/confirmation_replies.tsv``
holds each reply with the verdict a person gives it. The accuracy is printed; every miss fails unless it is one
of the documented limitations below (also listed in docs/rules.md "Confirmation")."""

from __future__ import annotations

import pytest

from tests.support.paths import GOLDEN
from tooleval.rules import ConfirmationConfig, KeywordConfirmation
from tooleval.rules._gate_config import GateConfig
from tooleval.rules._replies import clauses

LIMITATIONS: dict[str, str] = {}
"""Reply -> why the rule reads it wrongly (documented in docs/rules.md); empty: no known miss in the set."""


def _labelled() -> list[tuple[str, str, str]]:
    rows = []
    for line in (GOLDEN / "confirmation_replies.tsv").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            verdict, reply, what = line.split("\t")
            rows.append((verdict, reply, what))
    return rows


LABELLED = _labelled()


def test_the_set_is_large_and_covers_every_kind():
    verdicts = [v for v, _, _ in LABELLED]
    assert len(LABELLED) >= 80
    assert {v: verdicts.count(v) for v in sorted(set(verdicts))} == {
        "confirmed": 46, "refused": 31, "silent": 4, "unclear": 18}
    kinds = " ".join(what for _, _, what in LABELLED)
    for kind in ("affirmation", "refusal", "deferral", "condition", "question back", "earlier clause", "French",
                 "German", "Spanish"):
        assert kind in kinds


def test_accuracy_on_the_labelled_replies(capsys):
    detector = KeywordConfirmation()
    misses = [(reply, verdict, detector.read(reply)) for verdict, reply, _ in LABELLED
              if detector.read(reply) != verdict]
    accuracy = 1 - len(misses) / len(LABELLED)
    with capsys.disabled():
        print(f"\nconfirmation replies: {len(LABELLED) - len(misses)}/{len(LABELLED)} right, "
              f"accuracy {accuracy:.4f}")
    unexplained = [m for m in misses if m[0] not in LIMITATIONS]
    assert unexplained == []


@pytest.mark.parametrize(("reply", "verdict"), [
    ("Sure, though please don't go ahead until Monday.", "refused"),
    ("Nope, nothing else to add. Yes, go ahead.", "confirmed"),
    ("Never mind the receipt; yes, change it.", "confirmed"),
])
def test_the_issue_examples(reply, verdict):
    assert KeywordConfirmation().read(reply) == verdict


def test_clauses_follow_punctuation_and_conjunctions():
    assert clauses("Sure, though please don't go ahead until Monday.") == [
        (0, ["sure"]), (0, ["please", "don't", "go", "ahead", "until", "monday"])]
    assert clauses("Nope. Yes, go ahead!") == [(0, ["nope"]), (1, ["yes"]), (1, ["go", "ahead"])]
    assert clauses("Which one? The first") == [(0, ["which", "one", "?"]), (1, ["the", "first"])]


class TestNegationWindow:
    def test_negation_window_is_refused_with_a_pointer(self):
        with pytest.raises(ValueError, match="negation_window was removed .* same clause"):
            ConfirmationConfig(negation_window=3)

    def test_in_gate_toml_it_is_a_file_error(self, tmp_path):
        from tooleval.errors import InputFileError
        from tooleval.rules import load_gate_config

        path = tmp_path / "gate.toml"
        path.write_text("[policy.confirmation]\nnegation_window = 3\n")
        with pytest.raises(InputFileError, match="negation_window was removed"):
            load_gate_config(path)

    def test_a_negation_far_before_the_affirmative_in_its_clause_still_counts(self):
        # the old window of 3 words missed this one: "don't" is 4 words before "go ahead"
        assert KeywordConfirmation().read("I don't think you should go ahead") == "refused"


BOOK = {"role": "assistant", "content": None,
        "tool_calls": [{"id": "1", "type": "function", "function": {"name": "book", "arguments": "{}"}}]}


def _conversation(*turns: dict) -> list[dict]:
    return [{"role": "user", "content": "Book HAT1"}, {"role": "assistant", "content": "Shall I book HAT1?"},
            *turns]


class TestStructuredSignals:
    def test_metadata_beats_words_both_ways(self):
        detector = KeywordConfirmation(ConfirmationConfig(signal_metadata="confirmed"))
        yes_words_no_click = _conversation({"role": "user", "content": "yes", "metadata": {"confirmed": False}}, BOOK)
        assert detector(yes_words_no_click, 3) == "refused"
        click = _conversation({"role": "user", "content": "hmm", "confirmed": True}, BOOK)
        assert detector(click, 3) == "confirmed"
        no_signal = _conversation({"role": "user", "content": "yes"}, BOOK)
        assert detector(no_signal, 3) == "confirmed"  # words decide when the message has no signal

    def test_a_successful_confirmation_tool_call_confirms(self):
        ask = {"role": "assistant", "content": None, "tool_calls": [
            {"id": "9", "type": "function", "function": {"name": "confirm_action", "arguments": "{}"}}]}
        detector = KeywordConfirmation(ConfirmationConfig(signal_tool="confirm_action"))
        assert detector(_conversation(ask, {"role": "tool", "content": "ok"}, BOOK), 4) == "confirmed"
        failed = _conversation(ask, {"role": "tool", "content": "Error: declined"}, BOOK)
        assert detector(failed, 4) == "silent"

    def test_gate_toml_declares_them(self):
        config = GateConfig.from_toml('[policy.confirmation]\nsignal_tool = "confirm_action"\n'
                                      'signal_metadata = "confirmed"\n')
        assert config.policy.confirmation.signal_tool == "confirm_action"
        assert config.policy.confirmation.signal_metadata == "confirmed"


class TestAYesThatHoldsTheActionBack:
    """A yes whose own clause or the clause right after it defers or withholds the action is not consent: the user
    says yes to something, but not to the action now. One test per kind of holding back."""

    @pytest.mark.parametrize("reply", [
        "Yes, but don't cancel it yet.",
        "Yes. Don't cancel it yet.",
        "Yes don't book it yet",
        "Sure, but do not book it.",
        "OK, but don't actually change anything.",
        "Yes, but never cancel it without asking me.",
    ])
    def test_an_imperative_negation_of_the_action(self, reply):
        assert KeywordConfirmation().read(reply) == "refused"

    @pytest.mark.parametrize("reply", [
        "Yes, but I'm not ready yet.",
        "Yes, I haven't decided.",
        "Okay, I'm still thinking about it.",
    ])
    def test_not_ready_or_undecided(self, reply):
        assert KeywordConfirmation().read(reply) == "refused"

    @pytest.mark.parametrize("reply", [
        "Yes, but let me talk to my wife first.",
        "Sure, I need to ask my manager.",
        "Yes, let me confirm with the hotel.",
    ])
    def test_someone_else_first(self, reply):
        assert KeywordConfirmation().read(reply) == "refused"

    @pytest.mark.parametrize("reply", [
        "Yes, but only after the refund arrives.",
        "Sure, once I get the voucher.",
        "Yes, not until my card is replaced.",
    ])
    def test_after_an_event(self, reply):
        assert KeywordConfirmation().read(reply) == "refused"

    @pytest.mark.parametrize("reply", [
        "Yes, but leave it for now.",
        "OK, keep it for now.",
        "Yes, hold it.",
    ])
    def test_for_now(self, reply):
        assert KeywordConfirmation().read(reply) == "refused"

    @pytest.mark.parametrize("reply", [
        "Yes, don't worry about the fee.",  # a negation of something that is not the action
        "Yes, and don't forget the receipt.",
        "Yes, cancel the first one.",
        "I can't send the form myself, so yes, please go ahead.",  # a negation that states a fact
        "Don't cancel it yet. Actually, yes, go ahead.",  # the later yes decides
        # further on than the clause right after the yes, a holding back is about something else
        "Yes, please cancel NQNU5R. Thanks. For IFOYYZ, I'll leave it for now.",
    ])
    def test_consent_stays_consent(self, reply):
        assert KeywordConfirmation().read(reply) == "confirmed"
