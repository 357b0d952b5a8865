"""computed: active-active compute daemons for OpenStack Ironic.

This package holds the product's library code. It owns no global state:
configuration is created by the console scripts in ``computed.cmd`` and passed
down, and nothing here imports eventlet (only ``computed.cmd`` does).
"""
