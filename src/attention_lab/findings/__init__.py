"""Findings as code: each finding of docs/experiments.md declared once, with its sweep, its seeds and its claims in
checkable form, and checked on a sweep's records (``scripts/findings.py``)."""
