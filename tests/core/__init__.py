"""Tests of tooleval's top-level modules: models, canonical argument values, matching, datasets."""
