"""computed's hash ring and node-ownership rules.

Pure code: no I/O, no threads, no module-level mutable state, no eventlet.
``ring`` maps keys to members, ``bounded`` is the opt-in load-capped bulk
assignment over a ring, ``ownership`` applies the daemon's rules on top of
them, ``keys`` owns hashing and encoding, ``errors`` the exceptions.
"""

from hashring.bounded import bounded_assign
from hashring.errors import EmptyRing, UnknownNode
from hashring.ownership import (
                                Member,
                                Move,
                                Ownership,
                                compute_ownership,
                                member_ring,
                                moves,
                                moves_between,
)
from hashring.ring import HashRing

__all__ = ["EmptyRing", "HashRing", "Member", "Move", "Ownership",
           "UnknownNode", "bounded_assign", "compute_ownership", "member_ring",
           "moves", "moves_between"]
