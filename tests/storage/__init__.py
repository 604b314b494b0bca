"""Tests of tooleval.storage: schemas, partitions, commit markers, queries, S3."""
