"""The repository's commands (tools/run-tests, tools/run-local, tools/services, tools/bootstrap).

A package only so that ``python -m tools.demo`` (what tools/run-local runs) works from the
repository root, where it imports :mod:`bench.seed`, and so that the tests import its modules.
"""
