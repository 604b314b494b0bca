"""Import Inspect AI ``.eval`` logs (zip archives of samples) as a tooleval dataset.

An ``.eval`` log is a zip: ``header.json`` (the eval: task, model, run id), one ``samples/<id>_epoch_<n>.json``
per sample and epoch, and summaries. Samples are read one zip member at a time, so a log of 200,000 samples is
never held whole; ``header.json`` is read for the model name only. Inspect compresses its members with Zstandard
(zip method 93), which Python's ``zipfile`` reads only from 3.14 on: before that a member is located by its local
header and decompressed with ``zstandard``, its size and CRC-32 checked as ``zipfile`` checks them.

**One sample (one epoch) is one trace**: case id = the sample ``id`` as text, trial = ``epoch - 1``. Its
``messages`` are Inspect's chat messages: an assistant message's ``tool_calls`` (``{"id", "function": name,
"arguments": {...}, "parse_error"}``) become chat-completions calls with the arguments written as JSON text. A
call Inspect could not parse (``parse_error`` set) keeps the parse error as its argument text, so the scorer counts
it as a malformed call instead of the ``{}`` Inspect stores beside it. ``tool`` messages keep ``tool_call_id`` and
``error`` (as ``is_error`` and ``error``). Content given as a list of blocks is joined from its text blocks.

**The executor's boundary** is read from the sample's ``events``: every ``tool`` event (``function``,
``arguments``, ``id``) is what the tool received; ``executor_calls`` lists them (``executions`` = events of one
call id). A sample without tool events has no executor record.

**Outcome and provenance.** The first score's value becomes ``metadata.reward`` when it is a number or Inspect's
letter grades (``C`` 1.0, ``P`` 0.5, ``I`` and ``N`` 0.0, Inspect's own ``value_to_float`` mapping); all scores are
kept in ``metadata.scores``. ``metadata.inspect`` keeps the task, run id, eval id, sample id, epoch and sample
``uuid``. References come from ``--references`` (case lines keyed by sample id) or an ``expected_calls`` key in
the sample's ``metadata`` (the dataset's own); Inspect's ``target`` is text, not calls, and is kept in the trace's
metadata.

**A sample that ended with an error** (Inspect's sample ``error``: the model call failed, a limit was hit as an
error, the solver raised) becomes a trace carrying that error's first line as its ``error``: its row fails as a
``generation_error`` instead of being scored as an answer without calls, and the import's notes count and name such
samples.
"""

from __future__ import annotations

import json
import struct
import zipfile
import zlib
from pathlib import Path
from typing import Any

from tooleval.errors import InputFileError
from tooleval.importers._common import check_revision, json_bytes
from tooleval.importers._conversations import Converted, _load_references, _Writer
from tooleval.importers._stream import DatasetStage, ImportReport, SkipLine, new_digest

__all__ = ["import_inspect"]

_GRADES = {"C": 1.0, "P": 0.5, "I": 0.0, "N": 0.0}
_ZSTD = 93  # the zip method id of Zstandard (APPNOTE 4.4.5), which Inspect writes every member with
_LOCAL_HEADER = struct.Struct("<4s22xHH")  # signature, the fixed fields, then the name and extra field lengths


def _text(content: Any) -> Any:
    if not isinstance(content, list):
        return content
    parts = [b.get("text") for b in content if isinstance(b, dict) and b.get("type") == "text"]
    return "\n".join(p for p in parts if isinstance(p, str))


def _call(call: Any) -> dict[str, Any]:
    if not isinstance(call, dict) or not isinstance(call.get("function"), str):
        raise SkipLine("a tool call has no function name")
    if call.get("parse_error"):
        arguments = str(call["parse_error"])
    else:
        given = call.get("arguments")
        arguments = given if isinstance(given, str) or given is None else json.dumps(given, ensure_ascii=False)
    out = {"id": call.get("id"), "type": "function", "function": {"name": call["function"], "arguments": arguments}}
    if call.get("parse_error"):
        out["parse_error"] = call["parse_error"]
    return out


def _message(message: Any) -> dict[str, Any]:
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        raise SkipLine("a message is not an object with a role")
    out: dict[str, Any] = {"role": message["role"], "content": _text(message.get("content"))}
    if message["role"] == "assistant" and message.get("tool_calls"):
        out["tool_calls"] = [_call(c) for c in message["tool_calls"]]
    if message["role"] == "tool":
        out["tool_call_id"] = message.get("tool_call_id")
        if message.get("error"):
            out["is_error"] = True
            out["error"] = message["error"]
    return out


def _executor(events: Any) -> list[dict[str, Any]] | None:
    calls: list[dict[str, Any]] = []
    by_id: dict[str, dict[str, Any]] = {}
    for event in events if isinstance(events, list) else []:
        if not isinstance(event, dict) or event.get("event") != "tool" or not isinstance(event.get("function"), str):
            continue
        if event.get("id") in by_id:
            by_id[event["id"]]["executions"] += 1
            continue
        given = event.get("arguments")
        record = {"name": event["function"], "executions": 1,
                  "args": given if isinstance(given, str) or given is None else json.dumps(given, ensure_ascii=False)}
        if event.get("error"):
            record["status"] = "error"
        if isinstance(event.get("id"), str):
            record["call_id"] = event["id"]
            by_id[event["id"]] = record
        calls.append(record)
    return calls or None


def _reward(scores: Any) -> float | None:
    if not isinstance(scores, dict) or not scores:
        return None
    first = next(iter(scores.values()))
    value = first.get("value") if isinstance(first, dict) else None
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return value
    return _GRADES.get(value) if isinstance(value, str) else None


def _convert(sample: Any, header: dict[str, Any]) -> Converted:
    if not isinstance(sample, dict) or not isinstance(sample.get("messages"), list):
        raise SkipLine("not an Inspect sample (no messages list)")
    if sample.get("id") is None:
        raise SkipLine("a sample has no id")
    epoch = sample.get("epoch", 1)
    if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 1:
        raise SkipLine("a sample's epoch is not an integer >= 1")
    messages = [_message(m) for m in sample["messages"]]
    evaluation = header.get("eval") if isinstance(header.get("eval"), dict) else {}
    fields: dict[str, Any] = {"case_id": str(sample["id"]), "trial": epoch - 1}
    model = evaluation.get("model")
    if isinstance(model, str):
        fields["agent"] = {"name": str(evaluation.get("task") or "inspect"), "model": model}
    sample_metadata = sample.get("metadata") if isinstance(sample.get("metadata"), dict) else {}
    if "expected_calls" in sample_metadata:
        fields["expected_calls"] = sample_metadata["expected_calls"]
    reward = _reward(sample.get("scores"))
    if reward is not None:
        fields["reward"] = reward
    metadata: dict[str, Any] = {"inspect": {"task": evaluation.get("task"), "run_id": evaluation.get("run_id"),
                                            "eval_id": evaluation.get("eval_id"), "sample_id": sample["id"],
                                            "epoch": epoch, "uuid": sample.get("uuid")}}
    if sample.get("scores"):
        metadata["scores"] = sample["scores"]
    if sample.get("target") is not None:
        metadata["target"] = sample["target"]
    trace_fields: dict[str, Any] = {"executor_calls": _executor(sample.get("events"))}
    error = _sample_error(sample.get("error"))
    if error is not None:  # the sample never finished: its row fails with that error, never scored as "no calls"
        trace_fields["error"] = error
    return Converted(messages, fields, metadata, trace_fields)


def _sample_error(error: Any) -> str | None:
    """The text of an Inspect sample's ``error`` (an object with a ``message``, or text), or ``None`` when the
    sample ran to its end. Only the message's first line is kept: the traceback stays in the log."""
    if not error:
        return None
    message = error.get("message") if isinstance(error, dict) else error
    text = str(message or "error").strip().splitlines()
    return f"Inspect sample error: {text[0] if text else 'error'}"


def _read(log: zipfile.ZipFile, member: str) -> bytes:
    """The bytes of ``member``, Zstandard members too (see the module docstring).

    Raises:
        zipfile.BadZipFile: The member's compressed data, size or CRC-32 does not check out.
    """
    info = log.getinfo(member)
    if info.compress_type != _ZSTD or hasattr(zipfile, "ZIP_ZSTANDARD"):  # Python 3.14's zipfile reads it itself
        return log.read(member)
    import zstandard

    with open(log.filename, "rb") as raw:
        raw.seek(info.header_offset)
        signature, name_length, extra_length = _LOCAL_HEADER.unpack(raw.read(_LOCAL_HEADER.size).ljust(
            _LOCAL_HEADER.size, b"\0"))
        if signature != b"PK\x03\x04":
            raise zipfile.BadZipFile(f"no local header for {member}")
        raw.seek(name_length + extra_length, 1)
        compressed = raw.read(info.compress_size)
    try:
        with zstandard.ZstdDecompressor().stream_reader(compressed, read_across_frames=True) as reader:
            data = reader.read()
    except zstandard.ZstdError as exc:
        raise zipfile.BadZipFile(f"{member}: {exc}") from exc
    if len(data) != info.file_size or zlib.crc32(data) != info.CRC:
        raise zipfile.BadZipFile(f"bad size or CRC-32 for {member}")
    return data


def _open(path: Path) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        raise InputFileError(path, None, f"not a readable .eval log ({exc}).",
                             "pass the .eval file Inspect wrote (a zip; re-copy it if it was truncated), or convert "
                             "a .json log with `inspect log convert --to eval`.") from exc


def import_inspect(
    src: Path,
    out: Path,
    *,
    name: str | None = None,
    revision: str | None = None,
    references: Path | None = None,
    agent: str | None = None,
) -> ImportReport:
    """Import Inspect AI ``.eval`` logs as one dataset folder (shapes and rules: this module's docstring).

    Args:
        src: An ``.eval`` file or a folder of them (Inspect's ``logs/``; read in name order).
        out: The dataset folder to write (``dataset.json``, ``cases.jsonl``, ``traces.jsonl.gz``).
        name: Dataset name; default: the folder name of ``out``.
        revision: Dataset revision; default ``"src-"`` + 12 hex digits of the SHA-256 of the samples read.
        references: Case lines keyed by sample id (Inspect's targets are text, not calls).
        agent: Agent name of every trace; default: the eval's task name.

    Returns:
        The counts: ``read`` = samples, skips by reason with ``file:member`` places.

    Raises:
        UnsafeRevisionError: ``revision`` is unsafe.
        InputFileError: The source is missing, a log is not a readable zip, or no case could be imported.
    """
    if revision is not None:
        check_revision(revision)
    src = Path(src)
    files = [src] if src.is_file() else sorted(src.glob("*.eval")) if src.is_dir() else []
    if not files:
        raise InputFileError(src, None, "no .eval log here.", "pass an .eval file or the folder Inspect logged to.")
    report = ImportReport()
    digest = new_digest()
    known = _load_references(Path(references), report, digest) if references is not None else None
    with DatasetStage(Path(out)) as stage:
        writer = _Writer(stage, known, agent or "inspect")
        errored: list[str] = []
        for path in files:
            with _open(path) as log:
                members = log.namelist()
                header = json.loads(_read(log, "header.json")) if "header.json" in members else {}
                for member in sorted(m for m in members if m.startswith("samples/") and m.endswith(".json")):
                    where = f"{path.name}:{member}"
                    report.read += 1
                    try:
                        try:
                            data = _read(log, member)
                            sample = json.loads(data)
                        except (OSError, ValueError, zipfile.BadZipFile) as exc:
                            raise SkipLine(f"a sample cannot be read ({type(exc).__name__})") from exc
                        digest.update(member.encode() + b"\0" + data)
                        converted = _convert(sample, header)
                        if agent:
                            converted.fields.pop("agent", None)
                        writer.add(converted, where, report.read, report)
                    except SkipLine as skip:
                        report.skip(skip.reason, where)
                        continue
                    report.converted += 1
                    if "error" in converted.trace_fields:
                        errored.append(where)
        if errored:
            named = ", ".join(errored[:5]) + (f" and {len(errored) - 5} more" if len(errored) > 5 else "")
            report.notes.append(f"{len(errored)} samples ended with an Inspect error ({named}); their rows fail "
                                "with it (generation_error), never scored as answers without calls.")
        if known is not None:
            writer.write_referenced_cases(stage)
        if not writer.case_count or not report.converted:
            reasons = "; ".join(f"{reason} ({n})" for reason, n in report.skipped.most_common(3)) or "no samples"
            raise InputFileError(files[0], None, f"no case could be imported: {reasons}.",
                                 "pass --references with case lines keyed by the samples' ids.")
        manifest = {"name": name or Path(out).resolve().name,
                    "revision": revision or "src-" + digest.hexdigest()[:12], "schema_version": 1,
                    "description": "Inspect AI .eval logs imported by tooleval (inspect).", "license": None,
                    "source": "inspect: " + ", ".join(p.name for p in files)}
        stage.write_bytes("dataset.json", json_bytes(manifest))
        report.datasets.append(stage.commit())
    return report
