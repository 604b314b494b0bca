"""prefect.yaml is checked here because Prefect's own YAML model ignores misspelled keys, does not check cron
strings and does not bind parameters to the flow's signature (PREFECT.md "Deployments")."""

from __future__ import annotations

import importlib
import inspect

import pytest
import yaml
from prefect.client.schemas.schedules import CronSchedule

from tests.support.paths import REPO

TOP_KEYS = {"name", "prefect-version", "build", "push", "pull", "deployments"}
DEPLOYMENT_KEYS = {"name", "description", "entrypoint", "parameters", "schedules", "work_pool", "tags", "version"}
SCHEDULE_KEYS = {"cron", "timezone", "active"}
WORK_POOL_KEYS = {"name", "work_queue_name", "job_variables"}


@pytest.fixture(scope="module")
def config() -> dict:
    return yaml.safe_load((REPO / "prefect.yaml").read_text())


def test_known_keys_only(config):
    assert set(config) <= TOP_KEYS
    for deployment in config["deployments"]:
        assert set(deployment) <= DEPLOYMENT_KEYS, set(deployment) - DEPLOYMENT_KEYS
        for schedule in deployment.get("schedules", []):
            assert set(schedule) <= SCHEDULE_KEYS
        assert set(deployment["work_pool"]) <= WORK_POOL_KEYS


def test_nightly_evaluation_is_scheduled_on_a_valid_cron(config):
    nightly = next(d for d in config["deployments"] if d["name"] == "nightly-evaluation")
    assert nightly["entrypoint"] == "flows/evaluate.py:evaluate"
    (schedule,) = nightly["schedules"]
    CronSchedule(cron=schedule["cron"], timezone=schedule["timezone"])  # raises on a bad cron or timezone
    minute, hour, day, month, weekday = schedule["cron"].split()
    assert (day, month, weekday) == ("*", "*", "*")  # every night


def test_invalid_cron_is_rejected_by_the_same_check():
    with pytest.raises(ValueError):
        CronSchedule(cron="0 25 * * *", timezone="UTC")


def test_parameters_bind_to_the_flow_signature(config):
    for deployment in config["deployments"]:
        path, name = deployment["entrypoint"].split(":")
        module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
        flow = getattr(module, name)
        signature = inspect.signature(flow.fn)
        bound = signature.bind(**deployment.get("parameters", {}))  # raises TypeError on an unknown parameter
        # a parameter typed by a model (the evaluation's RunSpec) is validated as Prefect validates it: an unknown
        # or misspelt field, or a value out of range, raises
        for parameter, value in bound.arguments.items():
            annotation = flow.fn.__annotations__.get(parameter)
            model = getattr(module, annotation, None) if isinstance(annotation, str) else annotation
            if isinstance(model, type) and hasattr(model, "model_validate"):
                value = model.model_validate(value)
                if hasattr(value, "dataset"):
                    assert (REPO / value.dataset).is_dir()


def test_drift_and_rescore_are_scheduled_and_rescore_gets_a_new_run_id_each_night(config):
    from flows.rescore import rescore

    by_name = {d["name"]: d for d in config["deployments"]}
    assert by_name["nightly-drift-check"]["entrypoint"] == "flows/drift.py:drift_check"
    assert by_name["nightly-rescore"]["entrypoint"] == "flows/rescore.py:rescore"
    for name in ("nightly-drift-check", "nightly-rescore"):
        (schedule,) = by_name[name]["schedules"]
        CronSchedule(cron=schedule["cron"], timezone=schedule["timezone"])
        assert by_name[name]["parameters"]["run_id"] == "latest"
    # A fixed to_run_id would make the second night refuse (or replace) the first night's run.
    assert "to_run_id" not in by_name["nightly-rescore"]["parameters"]
    assert inspect.signature(rescore.fn).parameters["to_run_id"].default is None
