"""Synthetic corpora for scale tests and benchmarks (``tooleval synth``): million-row corpora of a real
corpus's shape, which no bundled dataset is large enough to be.

:func:`write_synth` writes a dataset folder (``dataset.json``, ``cases.jsonl``, ``tools.json``,
``traces.jsonl``) of exactly ``rows`` (case, trial) rows, reproducible from ``seed``. Profiles:

* ``bfcl`` — short function-calling rows with BFCL's measured mismatch rates (:mod:`tooleval.synth._bfcl`);
* ``tau`` — long airline conversations resampled from the bundled tau-bench data (:mod:`tooleval.synth._tau`).

Rows are written streaming: memory does not grow with ``rows``.
"""

from tooleval.synth._write import PROFILES, SynthResult, write_synth

__all__ = ["PROFILES", "SynthResult", "write_synth"]
