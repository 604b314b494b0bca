"""tooleval's tests, one folder per package of the house (tests/<package>/), and the helpers they share (tests/support)."""
