"""The span formats' public importers: ``otlp`` (OpenTelemetry GenAI spans) and ``openinference``."""

from __future__ import annotations

from tooleval.importers import _genai, _openinference
from tooleval.importers._spans import span_importer

__all__ = ["import_openinference", "import_otlp"]

import_otlp = span_importer("otlp", _genai.read_span, "OpenTelemetry GenAI spans (OTLP JSON)")
import_openinference = span_importer("openinference", _openinference.read_span,
                                     "OpenInference spans (OTLP JSON or Phoenix Parquet)")
