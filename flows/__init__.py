"""Prefect flows composed from the stage tasks in ``tasks/``."""
