"""Importers: turn other benchmark formats into tooleval dataset folders (DESIGN.md "Inputs")."""

from tooleval.importers._tau_bench import import_tau_bench

__all__ = ["import_tau_bench"]
