"""Benchmarks of computed against the real services; figures go to BENCHMARKS.md.

Each benchmark is a module run from the repository root, ``.venv/bin/python -m bench.NAME``:
the ``-m`` puts the repository root on the path, so a benchmark imports the installed computed
and, from the repository, :mod:`bench.common` (what every benchmark shares), :mod:`bench.seed`
(many Ironic nodes quickly) and the test suite's fleet helpers (:mod:`tests.functional.daemons`,
:mod:`tests.chaos.chaos`). Nothing here is installed with computed.
"""
