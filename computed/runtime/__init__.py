"""What every computed process runs on: the RPC bus, keystoneauth adapters, the metrics and
health endpoint, systemd notification."""
