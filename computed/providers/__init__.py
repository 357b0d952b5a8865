"""Providers: what a node looks like as a Placement resource provider, the report wire format
and the daemon's outbox that sends reports to the reporters."""
