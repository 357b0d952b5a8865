"""Console scripts of computed: ``computed``, ``computed-reporter``, ``computed-manage``,
``computed-api``.

Every script runs on native threads: nothing here or below monkey-patches the standard library
(eventlet is not a dependency; ``tests/process/test_scripts.py`` fails if any script's
process imports it). kazoo uses its threading handler, oslo.messaging its threading executor,
and a stop is a :class:`computed.runtime.stopping.StopRequest`. Because nothing is patched, each
script's ``main(argv)`` can also be called in-process (the test suite does).
"""
