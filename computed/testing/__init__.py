"""Real services on loopback for the functional tests, the benchmarks and the demo.

The harness starts ZooKeeper, RabbitMQ, OpenStack Placement, OpenStack Ironic and (when a server is
available) PostgreSQL as ordinary processes bound to 127.0.0.1, each in a scratch directory and on a
free port. It checks readiness over each service's own protocol (``ruok`` for ZooKeeper, the AMQP
handshake, HTTP for the OpenStack APIs, the PostgreSQL wire protocol), never by looking at a PID, and
stops what it started by PID.

The harness uses only the standard library so that ``tools/services`` runs with any Python 3 and the
OpenStack services can live in virtualenvs of their own (see :mod:`computed.testing.venvs`).
"""
