"""The bare metal side: the driver interface the daemon codes against, the node catalog
(last-good listing) and Ironic's notifications turned into hints."""
