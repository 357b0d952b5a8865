"""The default timeouts fit together: a reporter whose Placement hangs answers its batch
(``failed``, resent later) before the daemon gives up on the call. The behaviour itself, with a
short timeout, is tests/functional/test_never_stuck.py."""

from oslo_config import cfg

from computed.conf import ksa, reporter


def _defaults() -> tuple[float, float]:
    conf = cfg.ConfigOpts()
    reporter.register_opts(conf)
    conf.register_opts(ksa.session_opts(), group="placement")
    conf([], project="computed")
    return conf.placement.timeout, conf.reporter.call_timeout


def test_placements_default_timeout_is_well_below_the_default_call_timeout():
    placement_timeout, call_timeout = _defaults()
    assert placement_timeout == ksa.HTTP_TIMEOUT
    # A hung Placement costs a batch about one timeout plus the requests already in flight
    # (computed.reporter.applier): twice the timeout must still fit in the call.
    assert 2 * placement_timeout < call_timeout, (placement_timeout, call_timeout)
