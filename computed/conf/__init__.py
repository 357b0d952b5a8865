"""computed's configuration options, one module per group.

``register_opts(conf)`` puts every option computed owns on a
``cfg.ConfigOpts`` created by the caller (there is no global CONF). Options
owned by libraries (oslo.log, oslo.messaging) are registered by
``computed.conf.loader``, which also parses and validates.
"""

from __future__ import annotations

from oslo_config import cfg

from computed.conf import (
    api,
    coordination,
    database,
    default,
    fleet,
    glance,
    ironic,
    messaging,
    metrics,
    placement,
    quota,
    reporter,
    scheduler,
    upgrade_levels,
)

MODULES = (default, coordination, fleet, ironic, placement, glance, reporter, scheduler, database,
           metrics, api, quota, messaging, upgrade_levels)


def register_opts(conf: cfg.ConfigOpts) -> None:
    """Register all of computed's own options on ``conf``."""
    for module in MODULES:
        module.register_opts(conf)
