"""The configuration this release deprecates, beyond what oslo.config's ``deprecated_for_removal``
says: ``computed-status upgrade check`` warns when a deployment sets one (docs/upgrades.md).

Owns :data:`DEPRECATED`: ``(group, option) -> what to do instead``, one line each. An option
deprecated in release N is listed here in N and removed (refused at start as unknown) in N+1,
so that an operator who runs the check before each upgrade meets the warning a release before
the refusal. 0.2.0 deprecates nothing of 0.1.0's configuration: every option 0.1.0 knew is
still read with the same meaning; what 0.2.0 refuses that 0.1.0 took silently (a missing
``transport_url``, ``handler=eventlet``, unknown ``backend_url`` keys) never was a valid
setting and is refused at once, listed in docs/upgrades.md.
"""

from __future__ import annotations

DEPRECATED: dict[tuple[str, str], str] = {}
