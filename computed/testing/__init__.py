"""Real services on loopback for the functional tests, the benchmarks and the demo.

The harness starts ZooKeeper, RabbitMQ, OpenStack Placement, OpenStack Ironic and (when a server is
available) PostgreSQL as ordinary processes bound to 127.0.0.1, each in a scratch directory and on a
free port. It checks readiness over each service's own protocol (``ruok`` for ZooKeeper, the AMQP
handshake, HTTP for the OpenStack APIs, the PostgreSQL wire protocol), never by looking at a PID,
and stops what it started by PID.

The harness imports only the standard library and its own modules: starting a stack loads none of
computed's dependencies (no eventlet, no oslo), and the OpenStack services it starts live in
virtualenvs of their own (:mod:`computed.testing.venvs`), so their pinned libraries never meet
computed's. It is importable wherever computed is installed; ``tools/services`` runs it with the
repository's .venv (built by ``tools/bootstrap``).
"""
