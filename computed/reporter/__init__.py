"""The reporter: applies the daemons' provider reports to Placement, ordered and fenced
(:mod:`.applier`), behind an RPC endpoint (:mod:`.endpoint`)."""
