"""The compute daemon: its threads and the node sync pass (the wiring lives in computed.cmd)."""
