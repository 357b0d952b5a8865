"""The repository's commands (tools/run-tests, tools/run-local, tools/services, tools/bootstrap).

A package only so that ``python -m tools.demo`` runs the demo from the repository root, where it
imports :mod:`bench.seed` and the test suite's :mod:`tests.functional.daemons`.
"""
