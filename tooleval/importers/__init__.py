"""Importers: turn other formats into tooleval dataset folders (docs/design.md "Inputs"; README "Importing").

One module per format; each ``import_*`` function streams its source and returns an :class:`ImportReport`
(read, converted, skipped with reasons), except :func:`import_tau_bench`, which returns the folder it wrote.
"""

from tooleval.importers._anthropic import anthropic_messages, import_anthropic
from tooleval.importers._atif import import_atif
from tooleval.importers._bfcl import import_bfcl
from tooleval.importers._gemini import gemini_messages, import_gemini
from tooleval.importers._inspect import import_inspect
from tooleval.importers._langchain import import_langchain, langchain_message
from tooleval.importers._openai_chat import import_openai_chat
from tooleval.importers._openai_responses import import_openai_responses, responses_messages
from tooleval.importers._stream import ImportReport, SkipLine
from tooleval.importers._span_formats import import_mlflow, import_openinference, import_otlp
from tooleval.importers._tau2 import import_tau2
from tooleval.importers._tau2_checks import ActionVerdict, compare_action_checks
from tooleval.importers._tau_bench import import_tau_bench

__all__ = [
    "ActionVerdict",
    "ImportReport",
    "anthropic_messages",
    "compare_action_checks",
    "gemini_messages",
    "import_anthropic",
    "import_atif",
    "import_bfcl",
    "import_gemini",
    "import_inspect",
    "import_langchain",
    "import_mlflow",
    "import_openai_chat",
    "import_openai_responses",
    "import_openinference",
    "import_otlp",
    "import_tau2",
    "import_tau_bench",
    "langchain_message",
    "responses_messages",
    "SkipLine",
]
