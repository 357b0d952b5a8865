"""Errors raised by the hash ring.

Owns the exception types callers catch.  Both are ``LookupError`` subclasses
because each one means "this lookup has no answer", not "the input is
malformed" (malformed input raises ``ValueError`` or ``TypeError``).
"""

from __future__ import annotations

from typing import Any


class UnknownNode(LookupError):
    """A member that is not on the ring was asked to leave it.

    Named after ``tooz.hashring.UnknownNode`` so that code written against
    tooz reads the same; ``member`` carries the offending member as given.
    """

    def __init__(self, member: Any) -> None:
        super().__init__(f"unknown ring member {member!r}")
        self.member = member

    @property
    def node(self) -> Any:
        """tooz calls members "nodes"; keep its attribute name too."""
        return self.member


class EmptyRing(LookupError):
    """A key was looked up on a ring that has no members."""

    def __init__(self) -> None:
        super().__init__("the hash ring has no members: add at least one "
                         "member before looking keys up")
