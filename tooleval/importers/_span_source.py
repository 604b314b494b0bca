"""Reading spans, one at a time, from the files observability tools write.

Three containers are read, each streamed so that memory does not grow with the file:

* **OTLP JSON lines** (``*.jsonl``, ``*.json`` with one document a line, ``.gz`` allowed): what an OpenTelemetry
  collector's file exporter and the SDK's OTLP JSON file exporter write, one ``ExportTraceServiceRequest``
  (``{"resourceSpans": [...]}``) a line.
* **One OTLP JSON document** (a ``.json`` file whose first line is not a whole document, e.g. pretty-printed):
  read with ijson's incremental parser, one span at a time.
* **Phoenix span exports** (OpenInference): what Phoenix's client (``client.spans.get_spans()``) and REST API
  (``GET /v1/projects/{id}/spans``: ``{"data": [...]}``) return, saved as one JSON list (or that response body) or
  as JSON lines of spans. A span there is ``{"context": {"trace_id", "span_id"}, "parent_id", "name",
  "span_kind", "start_time" (ISO 8601), "attributes" (flat dotted keys, or nested), "events"}``; a large JSON
  list is read span by span like an OTLP document.
* **Phoenix's spans dataframe in Parquet** (``*.parquet``, OpenInference): read one record batch at a time; its
  nested ``attributes.*`` columns are flattened back to OpenInference's dotted keys.

Each span becomes a :class:`Span` with plain Python attribute values (OTLP's ``AnyValue`` decoded: ``intValue``
text becomes an ``int``, ``kvlistValue`` a ``dict``). Trace and span ids are lower-case hex whether the file wrote
them as hex (the OTLP JSON encoding) or as base64 (protobuf's generic JSON mapping).
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from tooleval.errors import InputFileError
from tooleval.importers._stream import SourceLine, iter_source_lines

__all__ = ["NOT_SPANS", "Span", "BadRecord", "iter_spans", "decode_value"]

NOT_SPANS = "not an OTLP ExportTraceServiceRequest or a Phoenix span (no resourceSpans list, no context)"
"""The skip reason of a JSON value that holds no span in any shape read here."""


@dataclass
class Span:
    """One span, decoded.

    Attributes:
        trace_id: 32 lower-case hex digits.
        span_id: 16 lower-case hex digits.
        parent_id: The parent span's id, ``None`` for a root span.
        name: The span name.
        start_ns: Start time in Unix nanoseconds (0 when absent).
        attributes: Attribute key -> decoded value.
        events: ``[{"name", "attributes"}]`` in file order.
        service: The resource's ``service.name`` (``None`` when absent).
        where: ``file:line`` (JSON lines), ``file:span N`` (one document) or ``file:row N`` (Parquet).
    """

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    service: str | None = None
    where: str = ""


@dataclass
class BadRecord:
    """A record that holds no readable span: why, and where (counted as a skip by the importer)."""

    reason: str
    where: str


def decode_value(value: Any) -> Any:
    """Decode an OTLP JSON ``AnyValue`` (``{"stringValue": ...}`` etc.) to a plain Python value.

    A value that is not an ``AnyValue`` object is returned as is (Phoenix and some exporters write plain JSON).
    """
    if not isinstance(value, dict) or len(value) != 1:
        return value if not isinstance(value, dict) or value else None
    (kind, inner), = value.items()
    if kind == "stringValue" or kind == "boolValue" or kind == "doubleValue":
        return inner
    if kind == "intValue":
        try:
            return int(inner)
        except (TypeError, ValueError):
            return inner
    if kind == "arrayValue":
        return [decode_value(v) for v in (inner or {}).get("values", [])]
    if kind == "kvlistValue":
        return {kv.get("key"): decode_value(kv.get("value")) for kv in (inner or {}).get("values", [])}
    if kind == "bytesValue":
        return inner
    return value


def _attributes(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):  # already a mapping (some exporters)
        return {str(k): decode_value(v) for k, v in raw.items()}
    out: dict[str, Any] = {}
    for item in raw or []:
        if isinstance(item, dict) and isinstance(item.get("key"), str):
            out[item["key"]] = decode_value(item.get("value"))
    return out


def _hex_id(value: Any, size: int) -> str | None:
    """An id as lower-case hex: hex text of the right length as is, else base64 decoded; ``None`` if neither."""
    if not isinstance(value, str) or not value:
        return None
    if len(value) == size * 2:
        try:
            bytes.fromhex(value)
            return value.lower()
        except ValueError:
            pass
    try:
        data = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
    return data.hex() if len(data) == size else None


def _span(raw: Any, service: str | None, where: str) -> Span | BadRecord:
    if not isinstance(raw, dict):
        return BadRecord("a span is not a JSON object", where)
    trace_id, span_id = _hex_id(raw.get("traceId"), 16), _hex_id(raw.get("spanId"), 8)
    if trace_id is None or span_id is None:
        return BadRecord("a span has no valid traceId or spanId", where)
    parent = raw.get("parentSpanId")
    parent_id = _hex_id(parent, 8) if parent else None
    if parent and parent_id is None:
        return BadRecord("a span's parentSpanId is not a span id", where)
    try:
        start = int(raw.get("startTimeUnixNano") or 0)
    except (TypeError, ValueError):
        return BadRecord("a span's startTimeUnixNano is not an integer", where)
    events = [{"name": e.get("name"), "attributes": _attributes(e.get("attributes"))}
              for e in raw.get("events") or [] if isinstance(e, dict)]
    return Span(trace_id, span_id, parent_id, str(raw.get("name") or ""), start, _attributes(raw.get("attributes")),
                events, service, where)


def _resource_spans(request: Any, where: str) -> Iterator[Span | BadRecord]:
    """The spans of one ``ExportTraceServiceRequest`` (camelCase or snake_case keys)."""
    if not isinstance(request, dict) or not isinstance(request.get("resourceSpans", request.get("resource_spans")),
                                                        list):
        yield BadRecord(NOT_SPANS, where)
        return
    for resource_spans in request.get("resourceSpans", request.get("resource_spans")):
        if not isinstance(resource_spans, dict):
            yield BadRecord("a resourceSpans item is not a JSON object", where)
            continue
        resource = _attributes((resource_spans.get("resource") or {}).get("attributes"))
        service = resource.get("service.name")
        scopes = resource_spans.get("scopeSpans", resource_spans.get("scope_spans",
                                                                     resource_spans.get("instrumentationLibrarySpans")))
        for scope in scopes or []:
            for raw in (scope or {}).get("spans") or []:
                yield _span(raw, service if isinstance(service, str) else None, where)


def _first_line_is_document(path: Path) -> bool:
    """Whether a ``.json`` file holds one document a line (its first non-blank line parses on its own)."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as handle:
        for data in handle:
            if data.strip():
                try:
                    json.loads(data)
                    return True
                except ValueError:
                    return False
    return True


def _iter_document(path: Path, handle: IO[bytes]) -> Iterator[Span | BadRecord]:
    """Spans of one (possibly huge) OTLP JSON document, built one at a time from ijson's events."""
    import ijson

    resource_prefix = "resourceSpans.item.resource"
    span_prefix = "resourceSpans.item.scopeSpans.item.spans.item"
    phoenix_prefixes = ("item", "data.item")  # a JSON list of Phoenix spans, or the REST API's response body
    service: str | None = None
    builder, depth, target, number = None, 0, None, 0
    saw_root = False
    try:
        for prefix, event, value in ijson.parse(handle, use_float=True):
            if builder is None:
                if (prefix == "" and event == "map_key" and value in ("resourceSpans", "data")) or (
                        prefix == "" and event == "start_array"):
                    saw_root = True
                if event == "start_map" and prefix in (resource_prefix, span_prefix, *phoenix_prefixes):
                    builder, depth, target = ijson.ObjectBuilder(), 0, prefix
                else:
                    if prefix == "resourceSpans.item" and event == "start_map":
                        service = None  # a new resource: its spans must not inherit the previous one's name
                    continue
            builder.event(event, value)
            depth += 1 if event in ("start_map", "start_array") else -1 if event in ("end_map", "end_array") else 0
            if depth == 0:
                if target == resource_prefix:
                    found = _attributes(builder.value.get("attributes")).get("service.name")
                    service = found if isinstance(found, str) else None
                elif target in phoenix_prefixes:
                    number += 1
                    yield from _record_spans(builder.value, f"{path.name}:span {number}")
                else:
                    number += 1
                    yield _span(builder.value, service, f"{path.name}:span {number}")
                builder = None
    except ijson.JSONError as exc:
        raise InputFileError(path, None, f"not a complete JSON document ({exc}); {number} spans were read before it.",
                             "re-export the file (it may be truncated), or write OTLP JSON lines.") from exc
    if not saw_root:
        yield BadRecord(NOT_SPANS, f"{path.name}:1")


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    """Phoenix nests OpenInference's dotted keys (``llm.output_messages`` -> a list of dicts); flatten them back."""
    if isinstance(value, dict):
        for key, inner in value.items():
            _flatten(f"{prefix}.{key}" if prefix else str(key), inner, out)
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        for index, inner in enumerate(value):
            _flatten(f"{prefix}.{index}", inner, out)
    elif value is not None:
        out[prefix] = value


def _iter_parquet(path: Path) -> Iterator[Span | BadRecord]:
    """Spans of Phoenix's spans dataframe saved as Parquet (``context.trace_id``, ``parent_id``, ``attributes.*``)."""
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises several types for a file that is not Parquet
        raise InputFileError(path, None, f"not a readable Parquet file ({exc}).",
                             "save Phoenix's spans with get_spans_dataframe().to_parquet(...).") from exc
    names = set(parquet.schema_arrow.names)
    if not {"context.trace_id", "context.span_id"} <= names:
        raise InputFileError(path, None, "no context.trace_id / context.span_id columns: not Phoenix's spans "
                             "dataframe.", "save Phoenix's spans with get_spans_dataframe().to_parquet(...).")
    number = 0
    for batch in parquet.iter_batches(batch_size=512):
        for record in batch.to_pylist():
            number += 1
            where = f"{path.name}:row {number}"
            attributes: dict[str, Any] = {}
            for key, value in record.items():
                if key.startswith("attributes."):
                    _flatten(key[len("attributes."):], value, attributes)
            start = record.get("start_time")
            start_ns = int(start.timestamp() * 1e9) if hasattr(start, "timestamp") else int(start or 0)
            kind = record.get("span_kind")
            if kind and "openinference.span.kind" not in attributes:
                attributes["openinference.span.kind"] = kind
            raw = {"traceId": record.get("context.trace_id"), "spanId": record.get("context.span_id"),
                   "parentSpanId": record.get("parent_id"), "name": record.get("name"), "startTimeUnixNano": start_ns}
            span = _span(raw, None, where)
            if isinstance(span, Span):
                span.attributes = attributes
            yield span


def _iso_ns(value: Any) -> int | None:
    """Unix nanoseconds of an ISO 8601 time (``Z`` or an offset; a naive time is read as UTC), else ``None``."""
    from datetime import datetime, timezone

    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000


def _phoenix_span(raw: Any, where: str) -> Span | BadRecord:
    """One span of a Phoenix span export (``context``, ``span_kind``, ``attributes``: the module docstring)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("context"), dict):
        return BadRecord("a Phoenix span has no context object", where)
    start_ns = _iso_ns(raw.get("start_time"))
    if raw.get("start_time") is not None and start_ns is None:
        return BadRecord("a Phoenix span's start_time is not an ISO 8601 time", where)
    context = raw["context"]
    span = _span({"traceId": context.get("trace_id"), "spanId": context.get("span_id"),
                  "parentSpanId": raw.get("parent_id"), "name": raw.get("name"), "startTimeUnixNano": start_ns},
                 None, where)
    if isinstance(span, Span):
        attributes: dict[str, Any] = {}
        _flatten("", raw.get("attributes") or {}, attributes)
        if raw.get("span_kind") and "openinference.span.kind" not in attributes:
            attributes["openinference.span.kind"] = raw["span_kind"]
        span.attributes = attributes
        span.events = [{"name": e.get("name"), "attributes": e.get("attributes") or {}}
                       for e in raw.get("events") or [] if isinstance(e, dict)]
    return span


def _is_phoenix_span(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("context"), dict) and "resourceSpans" not in value


def _record_spans(value: Any, where: str) -> Iterator[Span | BadRecord]:
    """The spans of one JSON value: an OTLP request, a Phoenix span, a list of either, or ``{"data": [...]}``."""
    if isinstance(value, dict) and isinstance(value.get("data"), list) and "resourceSpans" not in value:
        value = value["data"]  # the REST API's response body
    if isinstance(value, list):
        for number, item in enumerate(value, start=1):
            yield from _record_spans(item, f"{where} span {number}") if not _is_phoenix_span(item) else \
                [_phoenix_span(item, f"{where} span {number}")]
    elif _is_phoenix_span(value):
        yield _phoenix_span(value, where)
    else:
        yield from _resource_spans(value, where)


def _line_spans(line: SourceLine) -> Iterator[Span | BadRecord]:
    if line.error is not None:
        if line.error != "blank":
            yield BadRecord(line.error, line.where)
        return
    yield from _record_spans(line.value, line.where)


def iter_spans(paths: list[Path], digest: Any) -> Iterator[Span | BadRecord]:
    """Every span of the files, in file order, or a :class:`BadRecord` for what cannot be read.

    Args:
        paths: OTLP JSON lines or documents (``.json``, ``.jsonl``, ``.gz``) or Phoenix Parquet files.
        digest: A ``hashlib`` object updated with every byte read (the default revision derives from it).

    Raises:
        InputFileError: A file cannot be opened, is not gzip/Parquet as named, or a single JSON document (an
            OTLP request or a list of Phoenix spans) is truncated or invalid (nothing is written then).
    """
    for path in paths:
        if path.name.endswith(".parquet"):
            digest.update(path.name.encode() + b"\0")
            with open(path, "rb") as handle:
                for chunk in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(chunk)
            yield from _iter_parquet(path)
        elif path.name.endswith((".json", ".json.gz")) and not _first_line_is_document(path):
            opener = gzip.open if path.name.endswith(".gz") else open
            with opener(path, "rb") as handle:
                yield from _iter_document(path, _Hashing(handle, digest, path.name))
        else:
            for line in iter_source_lines([path], digest):
                yield from _line_spans(line)


class _Hashing:
    """A binary reader that feeds a digest with every byte it hands out (ijson reads through it)."""

    def __init__(self, handle: IO[bytes], digest: Any, name: str) -> None:
        self._handle = handle
        self._digest = digest
        digest.update(name.encode() + b"\0")

    def read(self, size: int = -1) -> bytes:
        data = self._handle.read(size)
        self._digest.update(data)
        return data
