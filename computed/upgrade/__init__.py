"""Rolling upgrades: the RPC version pins (:mod:`.levels`), what each service publishes about
itself in ZooKeeper (:mod:`.records`), and the checks of ``computed-status upgrade check``
(:mod:`.checks`)."""
