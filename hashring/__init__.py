"""computed's hash ring and node-ownership rules.

Pure code: no I/O, no threads, no module-level mutable state, no eventlet.
``ring`` maps keys to members, ``ownership`` applies the daemon's rules on
top of it, ``keys`` owns hashing and encoding, ``errors`` the exceptions.
"""

from hashring.errors import EmptyRing, UnknownNode
from hashring.ownership import (Member, Move, Ownership, compute_ownership,
                                moves, moves_between)
from hashring.ring import HashRing

__all__ = ["EmptyRing", "HashRing", "Member", "Move", "Ownership",
           "UnknownNode", "compute_ownership", "moves", "moves_between"]
