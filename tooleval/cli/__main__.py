"""``python -m tooleval.cli``."""

from tooleval.cli import main

main()
