"""Tests of tooleval.view: the viewer over HTTP and in a browser."""
