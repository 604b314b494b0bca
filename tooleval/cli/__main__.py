"""``python -m tooleval.cli``."""

from tooleval.cli import app

app()
