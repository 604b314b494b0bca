"""A dataset's cases are read from cases.jsonl when asked for (issue 9 item 1): a process holds an index of byte
offsets and a bounded number of parsed cases, never every case of a large dataset; what it reads is what an
eager load of every line would give, and a file changed under it is an error naming the file and line."""

from __future__ import annotations

import json

import pytest

from tests.support.paths import BUNDLED
from tooleval import dataset as dataset_module
from tooleval.dataset import Cases, load_dataset
from tooleval.errors import InputFileError
from tooleval.models import Case
from tooleval.synth import write_synth


def test_cases_read_on_demand_equal_every_line_parsed(tmp_path, monkeypatch):
    monkeypatch.setattr(dataset_module, "CASE_CACHE", 50)
    data = write_synth(2_000, 0, "bfcl", tmp_path / "data").path
    loaded = load_dataset(data)
    lines = [json.loads(line) for line in (data / "cases.jsonl").read_text().splitlines() if line.strip()]
    assert isinstance(loaded.cases, Cases)
    assert list(loaded.cases) == [line["case_id"] for line in lines]  # file order
    assert len(loaded.cases) == len(lines) > 50
    for line in lines:
        assert loaded.cases[line["case_id"]] == Case.model_validate(line)
    assert len(loaded.cases._recent) == 50  # only the most recently used cases stay parsed
    assert "no such case" not in loaded.cases and loaded.cases.get("no such case") is None
    with pytest.raises(KeyError):
        loaded.cases["no such case"]


def test_bundled_cases_match_and_a_changed_file_is_named(tmp_path):
    loaded = load_dataset(BUNDLED)
    assert len(loaded.cases) == 50  # ../shared/data/README.md: the bundled airline dataset holds 50 cases
    first = next(iter(loaded.cases))
    text = (BUNDLED / "cases.jsonl").read_text()
    copy = tmp_path / "ds"
    copy.mkdir()
    for name in ("dataset.json", "tools.json"):
        if (BUNDLED / name).exists():
            (copy / name).write_text((BUNDLED / name).read_text())
    (copy / "cases.jsonl").write_text(text)
    cases = load_dataset(copy).cases
    (copy / "cases.jsonl").write_text("\n" + text)  # every line moves one byte on
    with pytest.raises(InputFileError) as error:
        cases[first]
    assert "cases.jsonl" in str(error.value) and "changed after it was read" in str(error.value)
    assert "line 1" in str(error.value) or ":1" in str(error.value)


def test_items_and_values_read_the_file_once_in_order(tmp_path):
    data = write_synth(300, 0, "bfcl", tmp_path / "data").path
    cases = load_dataset(data).cases
    lines = [Case.model_validate(json.loads(line)) for line in (data / "cases.jsonl").read_text().splitlines()]
    assert list(cases.items()) == [(case.case_id, case) for case in lines]
    assert list(cases.values()) == lines and len(cases.values()) == len(lines)
    assert dict(cases) == {case.case_id: case for case in lines}


def test_trusted_load_indexes_what_the_full_load_validated(tmp_path):
    """A run's workers index the cases of a dataset whose content digest the plan validated (issue 9: the full
    check took ~17 s per process at 142,858 cases): the same ids in file order on the same lines — blank lines and
    integer ids included, one beyond 64 bits — the same cases, digests and slices; a changed file is refused, naming it."""
    import shutil

    from tooleval.dataset import case_digest, content_digest_of, load_dataset_trusted

    data = tmp_path / "ds"
    shutil.copytree(BUNDLED, data)
    lines = (data / "cases.jsonl").read_text().splitlines()
    numbered = json.loads(lines[3])
    numbered["case_id"] = 987654  # read as the text "987654"
    lines[3] = json.dumps(numbered)
    wide = json.loads(lines[4])
    wide["case_id"] = 2**70  # beyond 64 bits: orjson would read it as a float, 1.1805916207174113e+21
    lines[4] = json.dumps(wide)
    (data / "cases.jsonl").write_text("\n".join([lines[0], "", "   ", *lines[1:]]) + "\n")
    full = load_dataset(data)
    trusted = load_dataset_trusted(data, full.content_digest)
    assert trusted is not full and trusted.content_digest == full.content_digest == content_digest_of(data)
    assert list(trusted.cases) == list(full.cases) and "987654" in trusted.cases
    assert "1180591620717411303424" in trusted.cases
    assert trusted.cases._index == full.cases._index  # (byte offset, line number), blank lines counted
    assert [trusted.cases[k] for k in trusted.cases] == [full.cases[k] for k in full.cases]
    assert trusted.cases.digests() == full.cases.digests() == {k: case_digest(c) for k, c in full.cases.items()}
    assert trusted.cases.slices() == full.cases.slices()
    assert (trusted.manifest, trusted.tools) == (full.manifest, full.tools)
    (data / "cases.jsonl").write_text((data / "cases.jsonl").read_text() + "\n")  # one more blank line
    with pytest.raises(InputFileError) as info:
        load_dataset_trusted(data, full.content_digest)
    assert "changed while the run was going on" in str(info.value) and str(data.resolve()) in str(info.value)


def test_cases_read_ahead_are_kept_and_then_read_nothing(tmp_path):
    """A batch's cases read ahead in one pass are the cases a lookup would read, and asking for them afterwards
    reads nothing: the file can be gone by then. An id the dataset does not hold is refused before any read."""
    data = write_synth(300, 0, "bfcl", tmp_path / "data").path
    cases = load_dataset(data).cases
    lines = [json.loads(line) for line in (data / "cases.jsonl").read_text().splitlines() if line.strip()]
    wanted = [line["case_id"] for line in lines[::3]][::-1]  # out of file order, as a batch's rows may be
    with pytest.raises(KeyError):
        cases.read_ahead([wanted[0], "no such case"])
    cases._recent.clear()
    cases.read_ahead(wanted + wanted[:2])  # repeats are read once
    (data / "cases.jsonl").rename(data / "moved.jsonl")
    by_id = {line["case_id"]: line for line in lines}
    for case_id in wanted:
        assert cases[case_id] == Case.model_validate(by_id[case_id])
    with pytest.raises(OSError):  # a case not read ahead would need the file
        cases[lines[1]["case_id"]]
