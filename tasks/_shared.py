"""What shard tasks load once per worker process, not once per shard: the run's redactor (seeded with every
case, which costs O(cases)) and the case-input index of the join check. Keyed by the dataset's content digest and
the redaction config, so a changed dataset or key is never served from the cache. The threads of a worker share
these objects: the redactor keeps nothing of a call (each result carries its own redacted fields)."""

from __future__ import annotations

from functools import lru_cache

from tooleval.capture.redaction import RedactionConfig, Redactor, build_redactor
from tooleval.dataset import load_dataset_trusted
from tooleval.runs.plan import DatasetRef

__all__ = ["cached_redactor", "cached_case_inputs", "forget_run_state", "offer_seed_state"]


@lru_cache(maxsize=4)
def _redactor(out: str, redaction_json: str, path: str, content_digest: str) -> Redactor | None:
    redaction = RedactionConfig.model_validate_json(redaction_json)
    # a worker takes the seed state its flow handed over (offer_seed_state): loading it takes a fraction of a
    # second where seeding reads every case (17-26 s at 142,858 bfcl cases)
    return build_redactor(out, redaction, _cases(path, content_digest),
                          seed_state=_SEEDS.get((out, redaction_json, content_digest)))


_SEEDS: dict[tuple[str, str, str], bytes] = {}
"""(out, redaction config JSON, dataset content digest) -> the seed state the run's flow handed over."""


def offer_seed_state(out: str, redaction: RedactionConfig | None, dataset: DatasetRef, state: bytes | None) -> None:
    """Let this process's redactor for the run take ``state`` (:meth:`Redactor.seed_state` of the flow's
    redactor, same key, config and dataset) instead of seeding from every case; ``None`` or no redaction: nothing.
    Kept in memory only, since it holds the secrets; the latest run's state replaces an earlier one's."""
    if redaction is None or state is None:
        return
    key = (out, redaction.model_dump_json(), dataset.content_digest)
    if _SEEDS.get(key) != state:
        _SEEDS.clear()
        _SEEDS[key] = state


def _cases(path: str, content_digest: str) -> dict:
    return load_dataset_trusted(path, content_digest).cases  # raises when the dataset changed since the plan


def cached_redactor(out: str, redaction: RedactionConfig | None, dataset: DatasetRef) -> Redactor | None:
    """:func:`tooleval.capture.redaction.build_redactor` for the run, built once per process (``None``: off).

    Raises:
        tooleval.errors.InputFileError: the redaction key is missing or not the one the config was made with, or
            the dataset changed on disk since the run was planned.
    """
    if redaction is None:
        return None
    return _redactor(out, redaction.model_dump_json(), dataset.path, dataset.content_digest)


@lru_cache(maxsize=4)
def _inputs(out: str, redaction_json: str | None, path: str, content_digest: str) -> dict[str, list[str]]:
    from tooleval.scoring.rows import case_inputs

    redactor = None if redaction_json is None else _redactor(out, redaction_json, path, content_digest)
    return case_inputs(_cases(path, content_digest), redactor)


def cached_case_inputs(out: str, redaction: RedactionConfig | None, dataset: DatasetRef) -> dict[str, list[str]]:
    """:func:`tooleval.scoring.rows.case_inputs` of the run's dataset, computed once per process."""
    return _inputs(out, None if redaction is None else redaction.model_dump_json(), dataset.path,
                   dataset.content_digest)


def forget_run_state() -> None:
    """Drop this process's redactors, case-input maps and seed states (what the functions above keep per run).

    A flow calls it when its run is over: a process that runs another flow afterwards (a warm runner, or
    ``tooleval bench``'s two runs) otherwise kept the finished run's seeded redactor and input map beside the new
    run's, since the cache is keyed by the results folder and the run id is not part of the key; both grow with the
    dataset's cases. The next run of the same inputs seeds its redactor again, as any new run does.
    """
    _redactor.cache_clear()
    _inputs.cache_clear()
    _SEEDS.clear()
