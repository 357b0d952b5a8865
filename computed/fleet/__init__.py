"""The fleet: membership, node claims and their fence, the ownership plan and the reconciler
that carries it out, re-homing of orphaned instances, the audit log and the status document."""
