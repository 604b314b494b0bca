"""Import Google Gemini API conversations (JSON lines) as a tooleval dataset.

A record (one JSON line) is one of:

* a request body ``{"contents": [...], "systemInstruction"?, "tools"?, ...}``; an optional ``response`` (a
  ``GenerateContentResponse``) appends its first candidate's ``content`` as the agent's reply;
* a batch line ``{"request": {...}, "response": {...}}`` (Vertex AI batch prediction output), or
  ``{"key", "response"}`` (the Gemini API's batch output; ``key`` is the case id unless the line names one);
* a ``GenerateContentResponse`` alone (``{"candidates": [...], "responseId"?, "modelVersion"?}``);
* a bare JSON list of ``Content`` objects (``{"role": "user" | "model", "parts": [...]}``).

Keys are read in the REST API's camelCase (``functionCall``) and in the snake_case that the ``google-genai``
SDK's ``model_dump()`` writes (``function_call``). Parts of a ``model`` content become one assistant message:
``text`` parts joined as its content, ``functionCall`` parts its ``tool_calls`` in part order (parallel calls stay
in one message). ``args`` as an object is written as JSON text, as text it is copied as written (a malformed call
when scored); a ``functionCall`` without ``args`` is a call without parameters (the API leaves the field out then)
and is written with ``arguments: null``, which the scorer reads as no arguments. A call without an ``id`` (the
Gemini API gives none outside the Live API) gets ``gemini-<message>-<part>``; a ``functionResponse`` part becomes a
``tool`` message answering the call of its ``id``, else the earliest unanswered call of its ``name``, with the
``response`` object as JSON text and ``is_error: true`` when the object holds an ``error`` key (the convention the
SDK's automatic function calling writes). Every other part (``thought`` text, ``inlineData``, ``executableCode``,
``codeExecutionResult``...) is kept in the trace's ``metadata.other_parts`` with its content and part position.
``systemInstruction`` (text or a ``Content``) opens the conversation as a system message.

From the response: ``responseId`` becomes ``response_id``; ``modelVersion``, the candidate's ``finishReason`` and
``finishMessage`` go to the trace's ``metadata``. A candidate that ended in ``MALFORMED_FUNCTION_CALL`` holds no
call part (the API keeps the model's broken text in ``finishMessage`` only), so the row shows the call as missing.
"""

from __future__ import annotations

import json
from typing import Any

from tooleval.importers._conversations import Converted, conversation_importer, split_fields
from tooleval.importers._stream import SkipLine

__all__ = ["gemini_messages", "import_gemini"]

_MESSAGE_KEYS = frozenset({"contents", "response", "request", "key", "candidates", "systemInstruction",
                           "system_instruction", "responseId", "response_id", "modelVersion", "model_version",
                           "promptFeedback", "prompt_feedback", "sdk_http_response", "sdkHttpResponse"})


def _get(item: dict[str, Any], camel: str) -> Any:
    """``item[camel]``, else the snake_case spelling the SDK's ``model_dump()`` writes."""
    if camel in item:
        return item[camel]
    snake = "".join("_" + c.lower() if c.isupper() else c for c in camel)
    return item.get(snake)


def _system(instruction: Any) -> str | None:
    if instruction is None or isinstance(instruction, str):
        return instruction
    if not isinstance(instruction, dict):
        raise SkipLine("systemInstruction is not text or a Content object")
    texts = [p["text"] for p in instruction.get("parts") or [] if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return "\n".join(texts) if texts else None


class _Calls:
    """The calls made so far, to answer each ``functionResponse`` with the right call id."""

    def __init__(self) -> None:
        self.open: list[tuple[str, str]] = []  # (call id, name) not answered yet, in call order

    def made(self, call_id: str, name: str) -> None:
        self.open.append((call_id, name))

    def answer(self, call_id: Any, name: Any) -> Any:
        for index, (open_id, open_name) in enumerate(self.open):
            if (call_id is not None and open_id == call_id) or (call_id is None and open_name == name):
                del self.open[index]
                return open_id
        return call_id


def _call(part: dict[str, Any], m: int, p: int, calls: _Calls) -> dict[str, Any]:
    body = _get(part, "functionCall")
    if not isinstance(body, dict) or not isinstance(body.get("name"), str):
        raise SkipLine("a functionCall part has no name")
    call_id = body.get("id") if isinstance(body.get("id"), str) and body.get("id") else f"gemini-{m}-{p}"
    args = body.get("args")
    arguments = args if isinstance(args, str) or args is None else json.dumps(args, ensure_ascii=False)
    calls.made(call_id, body["name"])
    return {"id": call_id, "type": "function", "function": {"name": body["name"], "arguments": arguments}}


def _result(part: dict[str, Any], calls: _Calls) -> dict[str, Any]:
    body = _get(part, "functionResponse")
    if not isinstance(body, dict):
        raise SkipLine("a functionResponse part is not a JSON object")
    response = body.get("response")
    message: dict[str, Any] = {"role": "tool", "tool_call_id": calls.answer(body.get("id"), body.get("name")),
                               "name": body.get("name"),
                               "content": response if isinstance(response, str) or response is None
                               else json.dumps(response, ensure_ascii=False)}
    if isinstance(response, dict) and "error" in response:
        message["is_error"] = True
    return message


def gemini_messages(contents: Any, system: Any = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Turn Gemini ``Content`` objects into OpenAI chat-completions messages (rules: the module docstring).

    Args:
        contents: ``[{"role": "user" | "model", "parts": [...]}]``.
        system: The request's ``systemInstruction`` (text or a ``Content``), or ``None``.

    Returns:
        ``(messages, other_parts)``; each other part as ``{"content": i, "part": j, "item": part}``.

    Raises:
        SkipLine: ``contents`` is not a list of objects with a ``parts`` list, or a ``functionCall`` has no name.
    """
    if not isinstance(contents, list):
        raise SkipLine("contents is not a list")
    out: list[dict[str, Any]] = []
    others: list[dict[str, Any]] = []
    calls = _Calls()
    opening = _system(system)
    if opening is not None:
        out.append({"role": "system", "content": opening})
    for m, content in enumerate(contents):
        if not isinstance(content, dict) or not isinstance(content.get("parts", []), list):
            raise SkipLine("a content is not an object with a parts list")
        role = "assistant" if content.get("role") == "model" else content.get("role") or "user"
        texts: list[str] = []
        tool_calls: list[dict[str, Any]] = []
        results: list[dict[str, Any]] = []
        for p, part in enumerate(content.get("parts") or []):
            if not isinstance(part, dict):
                raise SkipLine("a part is not a JSON object")
            if _get(part, "functionCall") is not None:
                if role != "assistant":
                    raise SkipLine("a functionCall part outside a model content")
                tool_calls.append(_call(part, m, p, calls))
            elif _get(part, "functionResponse") is not None:
                results.append(_result(part, calls))
            elif isinstance(part.get("text"), str) and not part.get("thought"):
                texts.append(part["text"])
            else:
                others.append({"content": m, "part": p, "item": part})
        out.extend(results)
        if role == "assistant":
            message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
            if tool_calls:
                message["tool_calls"] = tool_calls
            out.append(message)
        elif texts or not results:
            out.append({"role": role, "content": "".join(texts) if texts else None})
    return out, others


def _candidate(response: Any) -> dict[str, Any]:
    if not isinstance(response, dict) or not isinstance(response.get("candidates"), list):
        raise SkipLine("response is not a GenerateContentResponse (no candidates list)")
    if not response["candidates"] or not isinstance(response["candidates"][0], dict):
        feedback = _get(response, "promptFeedback") or {}
        blocked = _get(feedback, "blockReason") if isinstance(feedback, dict) else None
        raise SkipLine(f"response has no candidate (prompt blocked: {blocked})" if blocked
                       else "response has no candidate")
    return response["candidates"][0]


def _convert(record: Any) -> Converted:
    if isinstance(record, list):
        messages, others = gemini_messages(record)
        return Converted(messages, {}, {"other_parts": others} if others else {})
    if not isinstance(record, dict):
        raise SkipLine("not a JSON object or list")
    request = record.get("request", record)
    if not isinstance(request, dict):
        raise SkipLine("request is not a JSON object")
    response = record.get("response", record if "candidates" in record else None)
    if "contents" not in request and response is None:
        raise SkipLine("no contents (no contents list, response or candidates)")
    contents = request.get("contents", [])
    if not isinstance(contents, list):
        raise SkipLine("contents is not a list")
    metadata: dict[str, Any] = {}
    if response is not None:
        candidate = _candidate(response)
        reply = candidate.get("content") or {"role": "model", "parts": []}
        contents = [*contents, {**reply, "role": reply.get("role") or "model"}]
        for key, name in (("finishReason", "finish_reason"), ("finishMessage", "finish_message")):
            if _get(candidate, key) is not None:
                metadata[name] = _get(candidate, key)
        if isinstance(_get(response, "modelVersion"), str):
            metadata["model"] = _get(response, "modelVersion")
    messages, others = gemini_messages(contents, _get(request, "systemInstruction"))
    if others:
        metadata["other_parts"] = others
    fields = split_fields(record, _MESSAGE_KEYS)
    if request is not record:  # a batch line: the request's own settings are the trace's too
        fields.update((k, v) for k, v in split_fields(request, _MESSAGE_KEYS).items() if k not in fields)
    if "key" in record and "case_id" not in fields:
        fields["case_id"] = record["key"]
    if response is not None and isinstance(_get(response, "responseId"), str) and "response_id" not in fields:
        fields["response_id"] = _get(response, "responseId")
    return Converted(messages, fields, metadata)


import_gemini = conversation_importer("gemini", _convert, "Google Gemini API conversations")
