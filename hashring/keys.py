"""Byte encoding and hashing of keys and members.

Owns the only two hash computations of the package, and guarantees that
both depend on nothing but their input bytes: no ``hash()``, no seed, no
platform byte order.  The same key or member therefore maps to the same
ring position in every process, on every host, under every Python >= 3.10.

* A key's position is the first 8 bytes of a hashlib digest (BLAKE2s by
  default: the fastest guaranteed digest for short keys such as UUIDs),
  read big-endian, with the low ``TAG_BITS`` bits cleared (see ``ring.py``
  for why).
* A member's tokens are the SHAKE-128 output stream of ``b"token:" +
  member``, cut into 8-byte little-endian words.  An extendable-output
  function is used because its output for a longer length starts with its
  output for a shorter one: raising a member's weight only *adds* tokens,
  so only keys moving *to* that member change owner.

Strings are encoded as UTF-8 and compared as bytes; nothing is normalised
(no case folding, no stripping).  Callers that need ``"Host-1"`` and
``"host-1"`` to be the same member must normalise before calling.
"""

from __future__ import annotations

import hashlib
import sys
from array import array
from collections.abc import Callable

Key = str | bytes

# The low bits of every token hold the owning member's index in the
# canonical member order; 16 bits allow 65,536 members.
TAG_BITS = 16
TAG_MASK = (1 << TAG_BITS) - 1
POSITION_MASK = ((1 << 64) - 1) ^ TAG_MASK
MAX_MEMBERS = 1 << TAG_BITS

DEFAULT_HASH_FUNCTION = "blake2s"

# Fixed-width digests only: SHAKE needs a length and is reserved for tokens.
_KEY_HASHES = frozenset(
    name for name in hashlib.algorithms_guaranteed
    if not name.startswith("shake_"))

_LITTLE_ENDIAN = sys.byteorder == "little"


def to_bytes(value: Key, what: str = "key") -> bytes:
    """Return ``value`` as bytes, rejecting empty and non-string values."""
    if isinstance(value, str):
        data = value.encode("utf-8")
    elif isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
    else:
        raise TypeError(f"{what} must be str or bytes, not "
                        f"{type(value).__name__}: {value!r}")
    if not data:
        raise ValueError(f"{what} must not be empty")
    return data


def key_hasher(name: str) -> Callable[[bytes], int]:
    """Return a function mapping key bytes to a 64-bit ring position.

    Only ``hashlib.algorithms_guaranteed`` are accepted: an algorithm that
    exists on one host but not on another would split the fleet's rings.
    """
    if name not in _KEY_HASHES:
        raise ValueError(
            f"hash function {name!r} is not supported; use one of "
            f"{', '.join(sorted(_KEY_HASHES))}")
    if name == "blake2s":
        blake2s = hashlib.blake2s
        from_bytes = int.from_bytes

        def position(data: bytes) -> int:
            # Converting the whole 32-byte digest and shifting is cheaper
            # than slicing it first.
            return (from_bytes(blake2s(data).digest(), "big") >> 192
                    & POSITION_MASK)
    else:
        new = hashlib.new

        def position(data: bytes) -> int:
            digest = new(name, data).digest()[:8]
            return int.from_bytes(digest, "big") & POSITION_MASK
    return position


def member_tokens(member: bytes, count: int) -> array:
    """Return ``count`` sorted token positions of ``member`` (tags zero)."""
    stream = bytearray(hashlib.shake_128(b"token:" + member).digest(8 * count))
    # Clear the tag bytes (the two least significant of each little-endian
    # word) so the tag can be filled in later without re-sorting.
    stream[0::8] = bytes(count)
    stream[1::8] = bytes(count)
    words = array("Q")
    words.frombytes(stream)
    if not _LITTLE_ENDIAN:
        words.byteswap()
    return array("Q", sorted(words))


def tag_tokens(tokens: array, tag: int) -> array:
    """Return a copy of ``tokens`` whose tag bits hold ``tag``.

    Works on the raw bytes so the cost is a couple of C-level slice
    assignments rather than a Python loop over every token.
    """
    raw = bytearray(tokens.tobytes())
    count = len(tokens)
    low, high = (0, 1) if _LITTLE_ENDIAN else (7, 6)
    raw[low::8] = bytes((tag & 0xFF,)) * count
    raw[high::8] = bytes((tag >> 8,)) * count
    tagged = array("Q")
    tagged.frombytes(raw)
    return tagged
