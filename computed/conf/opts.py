"""The ``oslo.config.opts`` entry point (``computed``) for the generator.

Lists exactly the options ``computed.conf.register_opts`` registers, plus the
documented keystoneauth plugin options of the keystoneauth sections.
"""

from __future__ import annotations

from oslo_config import cfg

from computed import conf as computed_conf


def list_opts() -> list[tuple[cfg.OptGroup | str, list[cfg.Opt]]]:
    result: list[tuple[cfg.OptGroup | str, list[cfg.Opt]]] = []
    for module in computed_conf.MODULES:
        result.extend(module.list_opts().items())
    return result
