"""The span formats' public importers: ``otlp`` (OpenTelemetry GenAI spans), ``openinference`` and ``mlflow``."""

from __future__ import annotations

from tooleval.importers import _genai, _mlflow, _openinference
from tooleval.importers._spans import span_importer

__all__ = ["import_mlflow", "import_openinference", "import_otlp"]

import_otlp = span_importer("otlp", _genai.read_span, "OpenTelemetry GenAI spans (OTLP JSON)")
import_openinference = span_importer("openinference", _openinference.read_span,
                                     "OpenInference spans (OTLP JSON or Phoenix Parquet)")
import_mlflow = span_importer("mlflow", _mlflow.read_span, "MLflow traces (SQLite store or ./mlruns file store)",
                              source=_mlflow.iter_store, provenance_keys=_mlflow.PROVENANCE_KEYS,
                              shape_fix=_mlflow.STORE_FIX)
