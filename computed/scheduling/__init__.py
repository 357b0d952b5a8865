"""Scheduling after Placement, as Nova's FilterScheduler does it for Ironic nodes.

Placement narrows the fleet to candidates (resource class, required and forbidden traits, exact
capabilities as traits); this package decides among them: Nova's extra-spec operators
(:mod:`.extra_specs_ops`), the host and request objects filters are called with
(:mod:`.host_state`), the candidates' facts read from Placement (:mod:`.candidates`), the
built-in filters and weighers (:mod:`.filters`, :mod:`.weighers`), loading operators' classes by
dotted path (:mod:`.loader`) and one isolated, time-bounded pass (:mod:`.pipeline`). Nothing here
depends on Nova.
"""
