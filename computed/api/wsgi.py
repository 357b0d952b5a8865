"""The compute API for a WSGI server (uwsgi, mod_wsgi): ``application``.

Owns the process-wide setup such a server cannot do for us: the configuration is read from
the files in ``COMPUTED_CONFIG_FILES`` (comma-separated; default
``/etc/computed/computed.conf``), validated as every computed program does, logging set up,
and the backends connected once, when the server first imports this module. Requests run on
the server's threads, kazoo on its own (as under ``computed-api``, :mod:`computed.api.httpd`).

uwsgi: ``uwsgi --http :8774 --module computed.api.wsgi:application --master --processes 2
--threads 8 --lazy-apps`` (``--lazy-apps``: each process connects after the fork).
"""

from __future__ import annotations

import os
from typing import Any

from oslo_log import log as logging

from computed.api import app, backends
from computed.conf import loader

CONFIG_FILES = 'COMPUTED_CONFIG_FILES'
DEFAULT_CONFIG = '/etc/computed/computed.conf'


def init_application() -> Any:
    files = [path for path in os.environ.get(CONFIG_FILES, DEFAULT_CONFIG).split(',') if path]
    argv = [arg for path in files for arg in ('--config-file', path)]
    conf = loader.load(argv, 'computed-api')
    logging.setup(conf, 'computed')
    return app.build(conf, backends.connect(conf, conf.coordination.backend_url))


application = init_application()
