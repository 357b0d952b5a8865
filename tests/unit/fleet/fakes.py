"""In-memory stand-ins for the fleet's ZooKeeper side, to drive :class:`Fleet` without a server,
and the fake monotonic clock the fence tests run on.

An :class:`Ensemble` plays ZooKeeper for several daemons at once: a zxid counter, the group's
members, the drain markers and the claim znodes. :class:`FakeMembership` and :class:`FakeClaims`
give one daemon the interface of :class:`computed.fleet.membership.Membership` and
:class:`computed.fleet.claims.ClaimTable` on it, with the same rule that matters: a node whose
claim exists is busy for everybody else. Sessions are not modelled: :meth:`Ensemble.expire`
removes what a host's session held, as ZooKeeper does when it expires it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from computed.fleet.claims import AcquireResult, Claim
from computed.fleet.membership import MemberInfo


class Done:
    """A kazoo async result already answered: ``value``, or raised if an exception."""

    def __init__(self, value):
        self.value = value

    def get(self, timeout=None):
        if isinstance(self.value, Exception):
            raise self.value
        return self.value


class Clock:
    """A monotonic clock that moves only when a test sets ``now``."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Ensemble:
    def __init__(self) -> None:
        self.zxid = 0
        self.members: dict[str, tuple[int, int]] = {}  # host -> (weight, member epoch)
        self.draining: set[str] = set()
        self.claims: dict[str, tuple[str, int]] = {}  # node -> (host, claim epoch)

    def next_zxid(self) -> int:
        self.zxid += 1
        return self.zxid

    def owners(self) -> dict[str, str]:
        return {node: host for node, (host, _) in self.claims.items()}

    def expire(self, host: str) -> None:
        """``host``'s session expired: its membership, ephemeral marker and claims are gone."""
        self.members.pop(host, None)
        self.draining.discard(host)
        self.claims = {node: claim for node, claim in self.claims.items() if claim[0] != host}


class FakeMembership:
    group = "fleet"

    def __init__(self, ensemble: Ensemble, host: str, weight: int = 1) -> None:
        self._ensemble = ensemble
        self.host = host
        self.weight = weight
        self.member_epoch = 0
        self.watching = False

    def join(self, timeout: float, stopping: Callable[[], bool]) -> int:
        self.member_epoch = self._ensemble.next_zxid()
        self._ensemble.members[self.host] = (self.weight, self.member_epoch)
        return self.member_epoch

    def leave(self) -> None:
        self._ensemble.members.pop(self.host, None)
        self._ensemble.draining.discard(self.host)

    def watch(self) -> None:
        self.watching = True

    def invalidate(self) -> None:
        pass  # members() reads the ensemble every time

    def members(self) -> list[MemberInfo]:
        return [MemberInfo(name, weight, name in self._ensemble.draining, member_epoch)
                for name, (weight, member_epoch) in sorted(self._ensemble.members.items())]

    def set_draining(self, reason: str, persistent: bool) -> None:
        self._ensemble.draining.add(self.host)


class FakeClaims:
    """One daemon's claims; ``calls`` lists every acquire and release, in order."""

    def __init__(self, ensemble: Ensemble, host: str) -> None:
        self._ensemble = ensemble
        self._host = host
        self._held: dict[str, Claim] = {}
        self.delete_released_passes = 0
        self.calls: list[tuple[str, list[str]]] = []

    def ensure_root(self) -> None:
        pass

    def held(self) -> dict[str, Claim]:
        return dict(self._held)

    def get(self, node: str) -> Claim | None:
        return self._held.get(node)

    def while_held(self, claim: Claim, do: Callable[[], None]) -> bool:
        if self._held.get(claim.node) != claim:
            return False
        do()
        return True

    def acquire(self, nodes: Iterable[str], member_epoch: int, term: int) -> AcquireResult:
        nodes = list(nodes)
        self.calls.append(("acquire", nodes))
        result = AcquireResult([], [], [])
        for node in nodes:
            if node in self._ensemble.claims:
                result.busy.append(node)
                continue
            claim = Claim(node, self._ensemble.next_zxid(), term)
            self._ensemble.claims[node] = (self._host, claim.epoch)
            self._held[node] = claim
            result.acquired.append(claim)
        return result

    def release(self, nodes: Iterable[str], leaving: bool = False) -> list[Claim]:
        nodes = list(nodes)
        self.calls.append(("release", nodes))
        released = [self._held.pop(node) for node in nodes if node in self._held]
        for claim in released:
            if self._ensemble.claims.get(claim.node) == (self._host, claim.epoch):
                del self._ensemble.claims[claim.node]
        return released

    def forget(self) -> list[Claim]:
        dropped, self._held = list(self._held.values()), {}
        return dropped

    def delete_released(self) -> int:
        # Counted apart from ``calls`` (the claim changes): every pass makes one.
        self.delete_released_passes += 1
        return 0
