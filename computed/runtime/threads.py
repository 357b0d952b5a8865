"""Native threads only: what makes every computed process run without eventlet.

computed's code is written for operating-system threads (``threading``, kazoo's threading
handler, oslo.messaging's threading executor). Two libraries under it would still pull eventlet
in by default, so :func:`use_native_threads` (called by ``computed/__init__.py``, before any other
computed module is imported) settles both, once per process:

* oslo.service, which oslo.messaging imports, loads its eventlet backend unless told otherwise:
  it is told to load its threading backend (its public ``init_backend``; the
  ``oslo.service[threading]`` extra in requirements.txt brings what that backend needs).
* eventlet itself stays installed (oslo.service 4.x still requires it), and futurist and tooz's
  ZooKeeper driver import it when they find it. :class:`EventletRefused` makes that import fail
  in computed's processes, so they take their no-eventlet paths, and so does anything else: an
  accidental ``import eventlet`` is an ImportError, not a silently half-green process.

Guarantees: in every process that imports computed before oslo.service (each of computed's
console scripts and :mod:`computed.api.wsgi` does, as its first import), ``import eventlet``
raises ImportError and oslo.service's backend is the threading one. A foreign process that had
already loaded oslo.service's eventlet backend before it imported computed (e.g.
``oslo-config-generator`` reading option lists) keeps it: it only reads computed's options.
"""

from __future__ import annotations

import importlib.abc
import sys
from typing import Any


class EventletRefused(importlib.abc.MetaPathFinder):
    """A meta path finder that refuses eventlet and its submodules (an ImportError saying why)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if fullname == 'eventlet' or fullname.startswith('eventlet.'):
            raise ImportError(f'{fullname}: computed runs on native threads and never imports '
                              f'eventlet (computed.runtime.threads)', name=fullname)
        return None


def use_native_threads() -> None:
    """Refuse eventlet and select oslo.service's threading backend; idempotent."""
    if not any(isinstance(finder, EventletRefused) for finder in sys.meta_path):
        sys.meta_path.insert(0, EventletRefused())
    from oslo_service import backend  # after the finder: its eventlet backend is never loaded

    if backend.get_backend_type() not in (None, backend.BackendType.THREADING):
        return  # a foreign host process chose before importing computed (see above)
    backend.init_backend(backend.BackendType.THREADING)
