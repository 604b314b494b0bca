"""Tests of flows: the evaluation flow, its shards and process pool, Dask, the Prefect deployment."""
