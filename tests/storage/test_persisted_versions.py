"""Every persisted shape carries a version, and changing a shape without bumping its version fails here.

``tests/golden/persisted_shapes.json`` records, per shape and version, a sha256 fingerprint of the shape: the
Arrow schema's column names and types for rows and trace envelopes, the JSON Schema of the run documents' models.
When a shape changes, this test fails until its version is bumped and the new fingerprint recorded (run this file
with ``TOOLEVAL_RECORD_SHAPES=1`` to print the entry to add); the fingerprints of older versions stay.
"""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from tests.support.paths import GOLDEN
from tooleval.runs.documents import DOCUMENT_MODELS
from tooleval.storage import ENVELOPE_SCHEMA, ENVELOPE_VERSION, ROW_SCHEMA, ROW_SCHEMA_VERSION

RECORDED = json.loads((GOLDEN / "persisted_shapes.json").read_text())


def _arrow_fingerprint(schema) -> str:
    text = "\n".join(f"{field.name}: {field.type} nullable={field.nullable}" for field in schema)
    return hashlib.sha256(text.encode()).hexdigest()


def _model_fingerprint(model) -> str:
    return hashlib.sha256(json.dumps(model.model_json_schema(), sort_keys=True).encode()).hexdigest()


def current_shapes() -> dict[str, tuple[int, str]]:
    """Shape name -> (current version, fingerprint of the current shape)."""
    shapes = {"rows": (ROW_SCHEMA_VERSION, _arrow_fingerprint(ROW_SCHEMA)),
              "traces": (ENVELOPE_VERSION, _arrow_fingerprint(ENVELOPE_SCHEMA))}
    for name, (model, version) in DOCUMENT_MODELS.items():
        shapes[name] = (version, _model_fingerprint(model))
    return shapes


@pytest.mark.parametrize("name", sorted(current_shapes()))
def test_a_changed_shape_has_a_new_version(name):
    version, fingerprint = current_shapes()[name]
    if os.environ.get("TOOLEVAL_RECORD_SHAPES"):
        print(json.dumps({name: {str(version): fingerprint}}))
    recorded = RECORDED.get(name, {})
    assert str(version) in recorded, (
        f"{name} version {version} has no recorded fingerprint: add {{{str(version)!r}: {fingerprint!r}}} to "
        "tests/golden/persisted_shapes.json (and a golden file of the new version)")
    assert recorded[str(version)] == fingerprint, (
        f"the {name} shape changed but its version is still {version}: bump the version, keep a golden file of the "
        "old one, and record the new fingerprint")


def test_the_fingerprint_sees_a_retyped_column():
    import pyarrow as pa

    retyped = ROW_SCHEMA.set(ROW_SCHEMA.get_field_index("trial"), pa.field("trial", pa.int64()))
    assert _arrow_fingerprint(retyped) != _arrow_fingerprint(ROW_SCHEMA)


class TestRunDocumentGoldens:
    """``summary_v1.json`` and ``drift_v1.json`` are the bundled run's documents as published (200 rows, 12 exact,
    mean f1 0.3538, mean ragas 0.3449, drift ok); ``errors_v1.json`` holds a trace of an unknown case."""

    def test_summary_v1_reads_with_its_figures(self):
        from tooleval.runs.documents import read_summary

        summary = read_summary(GOLDEN / "summary_v1.json")
        assert (summary.summary_version, summary.rows, summary.exact_match_rows) == (1, 200, 12)
        assert (summary.expected_calls, summary.observed_calls) == (632, 1164)
        assert round(summary.mean_f1, 4) == 0.3538 and round(summary.mean_ragas_tool_call_f1, 4) == 0.3449
        assert summary.drift.verdict == "ok" and summary.versions.row_schema == 4

    def test_summary_v2_says_which_row_outcome_judged_the_rows(self):
        """``summary_v2.json`` is the bundled run published by summary version 2: the same figures, and the row
        outcome its own gate.toml sets (judged by the rules alone), with the failing rows per rule."""
        from tooleval.runs.documents import read_summary, summary_document

        summary = read_summary(GOLDEN / "summary_v2.json")
        assert (summary.summary_version, summary.rows, summary.exact_match_rows) == (2, 200, 12)
        assert round(summary.mean_f1, 4) == 0.3538 and summary.blocking_rows == 117
        assert summary.drift.verdict == "ok"
        assert (summary.row_outcome.gate, summary.row_outcome.variability) == ("no_blocking", "gate")
        assert summary.row_outcome.config.endswith("datasets/tau-bench-airline/gate.toml")
        assert summary.failures_by_rule == {"forbidden_tool": 21, "missing_confirmation": 35, "missing_output": 12,
                                            "missing_write": 51, "repeated_side_effect": 1,
                                            "wrong_write_arguments": 44}
        assert summary.variability["pass@k"]["1"] == 0.415  # 83 of 200 rows block nothing, as the gate says
        data = json.loads((GOLDEN / "summary_v2.json").read_text())
        assert summary_document(data) == data
        # version 1 had neither key: its runs were judged by their rules alone
        assert read_summary(GOLDEN / "summary_v1.json").row_outcome is None

    def test_summary_v3_keeps_name_only_rows_apart(self):
        """``summary_v3.json`` is the run of tests/cli/test_name_only_flow.py (OpenLLMetry spans traced with content
        capture on, then off; worked by hand there): 8 rows, 4 of them name-only (arguments not captured) with a
        mean name-level f1 of 2/3, out of ``mean_f1`` (5/12 over the other 4) and ``exact_match_rows`` (1)."""
        from tooleval.runs.documents import read_summary, summary_document

        summary = read_summary(GOLDEN / "summary_v3.json")
        assert (summary.summary_version, summary.rows, summary.exact_match_rows) == (3, 8, 1)
        assert (summary.name_only_rows, round(summary.mean_name_f1, 4), round(summary.mean_f1, 4)) == (
            4, 0.6667, 0.4167)
        assert summary.versions.row_schema == 6 and summary.drift.verdict == "ok"
        assert summary.failures_by_rule == {"args_not_captured": 4, "reference_mismatch": 5}
        assert summary.row_outcome.accept_name_only is False  # the default gate: name-only rows fail
        assert summary.variability["pass@k"]["1"] == 0.125  # and so they do in pass@k
        data = json.loads((GOLDEN / "summary_v3.json").read_text())
        assert summary_document(data) == data
        # before version 3 no row was matched by name only: the keys are absent, read as None
        older = read_summary(GOLDEN / "summary_v2.json")
        assert (older.name_only_rows, older.mean_name_f1, older.row_outcome.accept_name_only) == (None, None, None)

    def test_an_unversioned_summary_reads_as_version_0(self, tmp_path):
        from tooleval.runs.documents import read_summary

        data = json.loads((GOLDEN / "summary_v1.json").read_text())
        del data["summary_version"]
        (tmp_path / "summary.json").write_text(json.dumps(data))
        assert read_summary(tmp_path / "summary.json").summary_version == 0

    def test_a_newer_summary_is_refused_by_name(self, tmp_path):
        from tooleval.errors import InputFileError
        from tooleval.runs.documents import SUMMARY_VERSION, read_summary

        data = json.loads((GOLDEN / "summary_v1.json").read_text())
        (tmp_path / "summary.json").write_text(json.dumps({**data, "summary_version": SUMMARY_VERSION + 1}))
        with pytest.raises(InputFileError, match=f"summary_version {SUMMARY_VERSION + 1} is newer"):
            read_summary(tmp_path / "summary.json")

    def test_an_unknown_summary_key_is_refused_at_writing(self):
        from pydantic import ValidationError

        from tooleval.runs.documents import summary_document

        data = json.loads((GOLDEN / "summary_v1.json").read_text())
        assert summary_document(data) == data  # the published document is its own normal form
        with pytest.raises(ValidationError, match="mean_f1_"):
            summary_document({**data, "mean_f1_": 0.5})

    def test_drift_and_errors_goldens(self):
        from tooleval.runs.documents import drift_document, errors_document

        drift = json.loads((GOLDEN / "drift_v1.json").read_text())
        assert drift_document(drift) == drift and drift["drift_version"] == 1
        assert drift["coverage"]["legacy"] == drift["coverage"]["new"] == 200
        errors = json.loads((GOLDEN / "errors_v1.json").read_text())
        assert errors_document(errors) == errors  # a version-1 document is a version-2 one
        assert [(e["kind"], e["line"]) for e in errors] == [("unknown_case", 3)]

    def test_errors_v2_kinds_are_the_closed_set(self):
        """``errors_v2.json`` holds the kinds a traces file's bad lines make (a trial out of range, a line that is
        not an object, a repeated key); a kind outside :data:`tooleval.storage.ERROR_KINDS` is refused at writing."""
        from pydantic import ValidationError

        from tooleval.runs.documents import ERRORS_VERSION, errors_document
        from tooleval.storage import ERROR_KINDS

        errors = json.loads((GOLDEN / "errors_v2.json").read_text())
        assert ERRORS_VERSION == 2 and errors_document(errors) == errors
        assert [(e["kind"], e["line"]) for e in errors] == [("bad_trace", 5), ("unreadable_trace", 6),
                                                            ("duplicate_key", None)]
        assert {"unreadable_trace", "duplicate_key"} <= set(ERROR_KINDS)
        with pytest.raises(ValidationError, match="kind"):
            errors_document([{**errors[0], "kind": "bad_line"}])
