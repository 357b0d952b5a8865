"""Instances: the lifecycle run by the owning daemon, scheduling through Placement, the
daemon's instance worker and the RPC API other processes call."""
