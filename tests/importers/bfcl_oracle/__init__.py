"""BFCL's own checker run beside tooleval's verdicts (tests/importers/test_bfcl_oracle.py)."""
