"""The fleet: membership, node claims and their fence, the reconcile plan (pure) and the
reconciler that carries it out, re-homing of orphaned instances, the audit log, the status
document, and the one module that reaches into tooz for the shared ZooKeeper session."""
