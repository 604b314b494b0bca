"""Write a large openai-chat JSON-lines file for measuring ``tooleval import``'s memory (docs/importers.md).

Each line is one conversation of ~2.5 kB (a 2,000-character system message, two tool calls, every seventh with
truncated argument text) over 5,000 cases::

    python bench/make_chat_jsonl.py /tmp/big.jsonl 1e9
    /usr/bin/time -v .venv/bin/tooleval import openai-chat /tmp/big.jsonl --out /tmp/big-dataset
"""

from __future__ import annotations

import argparse
import json


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path")
    parser.add_argument("size", type=float, help="bytes to write (at least)")
    args = parser.parse_args()
    written = lines = 0
    system = {"role": "system", "content": "x" * 2000}
    with open(args.path, "w", encoding="utf-8") as out:
        while written < args.size:
            order = f"A-{lines % 5000}"
            broken = lines % 7 == 0
            record = {
                "case_id": f"c{lines % 5000}",
                "expected_calls": [{"name": "get_order", "args": {"order_id": order}}],
                "messages": [
                    system,
                    {"role": "user", "content": f"order {lines}"},
                    {"role": "assistant", "content": None, "tool_calls": [
                        {"id": "1", "type": "function",
                         "function": {"name": "get_order", "arguments": json.dumps({"order_id": order})}},
                        {"id": "2", "type": "function",
                         "function": {"name": "refund", "arguments": '{"amount": 1' if broken else "{}"}}]},
                    {"role": "tool", "tool_call_id": "1", "content": "ok"},
                ],
            }
            line = json.dumps(record) + "\n"
            out.write(line)
            written += len(line)
            lines += 1
    print(f"{lines} lines, {written} bytes")


if __name__ == "__main__":
    main()
