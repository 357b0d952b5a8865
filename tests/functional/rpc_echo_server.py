"""A process that answers ``echo`` RPC calls, for the RPC smoke test.

Usage: python -m tests.functional.rpc_echo_server TRANSPORT_URL TOPIC SERVER LOCK_PATH
Prints ``ready`` once its server is running; stops on SIGTERM.
"""

import os
import signal
import sys
import threading

from oslo_config import cfg

from computed.runtime import rpc


class Echo:
    def echo(self, ctxt, value):
        return {"value": value, "pid": os.getpid()}


def main() -> None:
    url, topic, server_name, lock_path = sys.argv[1:5]
    conf = cfg.ConfigOpts()
    conf([])
    rpc.register_opts(conf)
    conf.set_override("lock_path", lock_path, group="messaging")
    transport = rpc.get_transport(conf, "test", url=url)
    server = rpc.get_server(transport, topic, server_name, [Echo()])
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server.start()
    print("ready", flush=True)
    stop.wait()
    server.stop()
    server.wait()
    transport.cleanup()


if __name__ == "__main__":
    main()
