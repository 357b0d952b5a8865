"""One znode in memory, answered as kazoo answers: for what drives
:class:`computed.daemon.listing.ListingRound` without a ZooKeeper server (its unit tests, and
``bench/round_cpu.py``, which measures a round's CPU in one process).

Owns :class:`OneZnode`: a single znode (whatever path is asked: the round keeps one) with
ZooKeeper's versioned writes: a write naming a version other than the znode's fails with
``BadVersionError``, a creation of an existing znode with ``NodeExistsError``, a read or write
of a missing one with ``NoNodeError`` (kazoo's exceptions). Each of kazoo's calls comes in its
``*_async`` form too, whose result (:class:`Answered`) is answered at once: the value, or the
exception raised again by ``get``, as kazoo's async result does.

Unlike the harness's modules it imports kazoo (its errors are what the code under test
catches); nothing that starts a service imports it. Not thread-safe: one caller at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError


class Stat:
    """What kazoo's ZnodeStat gives that the round reads: the version."""

    def __init__(self, version: int) -> None:
        self.version = version


class Answered:
    """A kazoo async result, answered at once with what ``call`` returns or raises."""

    def __init__(self, call: Callable[[], Any]) -> None:
        try:
            self.value, self.error = call(), None
        except Exception as exc:  # noqa: BLE001 - raised again by get, as kazoo does
            self.value, self.error = None, exc

    def get(self, timeout: float | None = None) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


class OneZnode:
    """One znode, missing until created; ``data`` and ``version`` are its state."""

    def __init__(self) -> None:
        self.data: bytes | None = None
        self.version = -1

    def get(self, path: str) -> tuple[bytes, Stat]:
        if self.data is None:
            raise NoNodeError(path)
        return self.data, Stat(self.version)

    def create(self, path: str, data: bytes, makepath: bool = False) -> str:
        if self.data is not None:
            raise NodeExistsError(path)
        self.data, self.version = data, 0
        return path

    def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        if self.data is None:
            raise NoNodeError(path)
        if version != -1 and version != self.version:
            raise BadVersionError(path)
        self.data, self.version = data, self.version + 1
        return Stat(self.version)

    def get_async(self, path: str) -> Answered:
        return Answered(lambda: self.get(path))

    def create_async(self, path: str, data: bytes, makepath: bool = False) -> Answered:
        return Answered(lambda: self.create(path, data, makepath))

    def set_async(self, path: str, data: bytes, version: int = -1) -> Answered:
        return Answered(lambda: self.set(path, data, version))
