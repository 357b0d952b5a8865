"""Placement's allocation candidates with what Placement knows of each node.

Owns reading ``GET /allocation_candidates`` into :class:`~computed.scheduling.host_state.NodeFacts`:
the same request as :func:`computed.placement.allocations.candidates` (one unit of the class,
the required and forbidden traits, a limit), read with its ``provider_summaries`` (Placement
1.17 and later give each provider's traits and its capacity and usage per class). A node's
capabilities are read back from its capability traits
(:func:`computed.providers.capabilities.parse_capability_trait`): the daemons report every
capability of ``properties['capabilities']`` as one, so the filters see the node's capabilities
without asking Ironic, and a build never waits on a scan of the fleet.

:func:`facts_from_body` is the pure part (a Placement answer to facts); :func:`read` sends the
request. Guarantees: candidates keep Placement's order, each node once; a node missing from the
summaries (an older Placement) gets facts with no traits, so filters refuse rather than guess.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from computed.placement.http import PlacementHTTP, json_body
from computed.providers.capabilities import parse_capability_trait
from computed.scheduling.host_state import NodeFacts


def query(resource_class: str, traits: Iterable[str], forbidden: Iterable[str],
          limit: int) -> str:
    """The ``/allocation_candidates`` URL of a request."""
    params = {'resources': f'{resource_class}:1', 'limit': str(limit)}
    wanted = list(traits) + [f'!{trait}' for trait in forbidden]
    if wanted:
        params['required'] = ','.join(wanted)
    return '/allocation_candidates?' + '&'.join(f'{key}={value}'
                                                for key, value in params.items())


def facts_from_body(body: Mapping[str, Any], resource_class: str) -> list[NodeFacts]:
    """The candidate nodes of an ``/allocation_candidates`` answer, in Placement's order."""
    summaries = body.get('provider_summaries') or {}
    nodes: list[NodeFacts] = []
    seen: set[str] = set()
    for request in body.get('allocation_requests', []):
        for provider in request.get('allocations', {}):
            if provider in seen:
                continue
            seen.add(provider)
            nodes.append(_facts(provider, summaries.get(provider) or {}, resource_class))
    return nodes


def _facts(uuid: str, summary: Mapping[str, Any], resource_class: str) -> NodeFacts:
    traits = frozenset(summary.get('traits') or ())
    capabilities: dict[str, str] = {}
    for trait in sorted(traits):
        pair = parse_capability_trait(trait)
        if pair is not None:
            capabilities[pair[0]] = pair[1]
    resource = (summary.get('resources') or {}).get(resource_class) or {}
    total = int(resource.get('capacity', 1))
    used = int(resource.get('used', 0))
    return NodeFacts(uuid=uuid, resource_class=resource_class, traits=traits,
                     capabilities=capabilities, total=total, used=used)


def read(placement: Any, resource_class: str, traits: Iterable[str] = (), *, limit: int,
         forbidden: Iterable[str] = ()) -> list[NodeFacts]:
    """The candidate nodes Placement offers for one unit of ``resource_class``.

    :raises PlacementError: status 400 when Placement refuses the request (an unknown class or
        trait; ``detail`` says which).
    """
    resp = PlacementHTTP(placement).request('GET', query(resource_class, traits, forbidden,
                                                         limit))
    return facts_from_body(json_body(None, 'allocation candidates', resp), resource_class)
