"""BFCL's own checker judging result lines: run with the Python of an environment that holds ``bfcl-eval``.

Reads JSON lines ``{key, category, mode, question, ground_truth, result}`` on stdin and writes ``{key, valid,
error_type}`` per line on stdout. It follows ``bfcl_eval/eval_checker/eval_runner.py``: a function-calling
model's output is decoded as its handler's ``decode_ast`` does (``[{name: json.loads(args)}]``; text or an
undecodable argument string fails to decode), then the relevance rule (irrelevance: no call decoded), the AST
checker (``ast_checker``) or, for multi-turn, the steps of ``_evaluate_single_multi_turn_entry`` (a result that
is not a list of turns is an inference error; fewer or more turns than the ground truth, force-terminated; each
step decoded to call strings, an undecodable or empty step left out) and then ``multi_turn_checker``, which
skips a turn whose ground truth is empty (the runner never calls ``multi_turn_irrelevance_checker``, at the data's
commit as at gorilla's head). The runner itself cannot be imported here: its module imports numpy, tqdm and
the Java parser's tree-sitter. Only BFCL's model registry is replaced: ``constants.model_config`` imports every provider's SDK,
and the checker reads one flag from it, ``underscore_to_dot`` (true for function-calling models, whose API
forbids ``.`` in names; false for prompt models), which ``mode`` sets here.
"""

from __future__ import annotations

import json
import sys
import types
from dataclasses import dataclass


@dataclass
class _Config:
    underscore_to_dot: bool


_registry = types.ModuleType("bfcl_eval.constants.model_config")
_registry.MODEL_CONFIG_MAPPING = {"fc-model": _Config(True), "prompt-model": _Config(False),
                                  "fc-model_ground_truth": _Config(True), "prompt-model_ground_truth": _Config(False)}
sys.modules["bfcl_eval.constants.model_config"] = _registry

from bfcl_eval.constants.enums import Language  # noqa: E402
from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker  # noqa: E402
from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker  # noqa: E402
from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils  # noqa: E402
from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import is_empty_execute_response  # noqa: E402
from bfcl_eval.utils import is_empty_output, is_function_calling_format_output  # noqa: E402


def decode(result):
    """A function-calling handler's ``decode_ast``: ``[{name: json.loads(args)}]``; raises on text."""
    if not isinstance(result, list):
        raise ValueError("not a list of calls")
    out = []
    for item in result:
        (name, args), = item.items()
        out.append({name: json.loads(args) if isinstance(args, str) else args})
    return out


def call_string(name: str, args: dict) -> str:
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in args.items())})"


def judge(line: dict) -> dict:
    category, model = line["category"], f"{line['mode']}-model"
    if "multi_turn" in category:
        if not isinstance(line["result"], list):
            return {"valid": False, "error_type": "multi_turn:inference_error"}
        if len(line["result"]) != len(line["ground_truth"]):
            return {"valid": False, "error_type": "multi_turn:force_terminated"}
        turns = []
        for turn in line["result"]:
            decoded_turn = []
            for step in turn:
                try:  # a function-calling handler's decode_execute: one call string per call
                    decoded = [call_string(n, a) for item in step for n, a in decode([item])[0].items()]
                except Exception:  # noqa: BLE001 - the runner leaves out a step it cannot decode
                    continue
                if not is_empty_execute_response(decoded):
                    decoded_turn.append(decoded)
            turns.append(decoded_turn)
        entry = dict(line["question"])
        # BFCL keeps each conversation's environment in module globals keyed by model and id (one run judges each
        # id once); every line here is a new run of the same id, so it starts from the initial state
        for name in [n for n in vars(multi_turn_utils) if n.endswith("_instance")]:
            delattr(multi_turn_utils, name)
        result = multi_turn_checker(turns, line["ground_truth"], entry, category, model)
        return {"valid": result["valid"], "error_type": result.get("error_type")}
    if "irrelevance" in category or "relevance" in category:
        try:
            called = not is_empty_output(decode(line["result"]))
        except Exception:  # noqa: BLE001
            called = False
        valid = not called if "irrelevance" in category else called
        return {"valid": valid, "error_type": None if valid else "irrelevance_error:decoder_success"}
    try:
        decoded = decode(line["result"])
    except Exception:  # noqa: BLE001
        return {"valid": False, "error_type": "ast_decoder:decoder_failed"}
    if not is_function_calling_format_output(decoded):
        return {"valid": False, "error_type": "ast_decoder:decoder_wrong_output_format"}
    result = ast_checker(line["question"]["function"], decoded, line["ground_truth"], Language.PYTHON, category, model)
    return {"valid": result["valid"], "error_type": result.get("error_type")}


def main() -> None:
    for text in sys.stdin:
        if text.strip():
            line = json.loads(text)
            print(json.dumps({"key": line["key"], **judge(line)}), flush=False)


if __name__ == "__main__":
    main()
