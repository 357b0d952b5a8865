"""computed: active-active compute daemons for OpenStack Ironic.

This package holds the product's library code. It owns no global state:
configuration is created by the console scripts in ``computed.cmd`` and passed
down. Every process that imports computed runs on native threads: the one
process-wide setting, made here before anything else is imported, refuses
eventlet and selects oslo.service's threading backend
(:mod:`computed.runtime.threads`).
"""

from computed.runtime.threads import use_native_threads

use_native_threads()
