"""Quota decisions by counting (seed 004): a project's limits and whether a build fits them.

Owns the pure part of quotas: the limits in force for a project (its own, else the defaults:
the quota class ``default``'s, ``[quota]``'s, Nova's; -1 is unlimited) and the comparison of
usage plus request with them. The counting
itself is :mod:`computed.api.quotas`' I/O: it takes the decision under the project's lock in the
database, counting live servers and the builds admitted before whose row does not exist yet
(:func:`computed.db.quotas.reserve_quota`), so a build is admitted once, before it is scheduled,
and never rolled back afterwards: concurrent builds cannot overshoot."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

INSTANCES = 'instances'
UNLIMITED = -1


@dataclasses.dataclass(frozen=True)
class Over:
    """A resource over its limit: what the 403 names."""

    resource: str
    limit: int
    used: int
    requested: int

    def __str__(self) -> str:
        return (f'Quota exceeded for {self.resource}: requested {self.requested}, but already '
                f'used {self.used} of {self.limit} {self.resource}')


def limit_of(resource: str, own: Mapping[str, int], defaults: Mapping[str, int],
             default_resource_class: int) -> int:
    """The limit in force for ``resource`` (one of Nova's keys, or a resource class): the
    project's own, else the default of that key, else (a class) ``default_resource_class``."""
    if resource in own:
        return own[resource]
    return defaults.get(resource, default_resource_class)


def over(limits: Mapping[str, int], used: Mapping[str, int],
         requested: Mapping[str, int]) -> list[Over]:
    """The requested resources that ``used + requested`` would put over their limit."""
    result = []
    for resource, amount in sorted(requested.items()):
        limit = limits.get(resource, UNLIMITED)
        count = used.get(resource, 0)
        if limit != UNLIMITED and count + amount > limit:
            result.append(Over(resource, limit, count, amount))
    return result
