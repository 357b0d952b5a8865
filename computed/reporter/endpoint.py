"""The reporter's RPC endpoint: ``apply_reports(reports=[...])`` on the topic ``[reporter] topic``.

A call reaches it only once :mod:`computed.runtime.rpc` accepted its envelope (signed, recent and
new when ``[messaging] signing_keys`` is set), and only ``apply_reports`` is on the bus
(``rpc_methods``).

Owns the oslo.messaging side of the reporter: the target's version (the report format's
:data:`computed.providers.report.API_VERSION`), the limits on what one call may make the reporter
do (:func:`computed.providers.report.admit`: reports past ``[reporter] max_reports_per_call`` are
answered ``failed`` and sent again by their daemon; a report over a size limit is answered
``invalid`` and logged in one line naming it), and handing the rest of each batch to a
:class:`computed.reporter.applier.ReportApplier`, whose answer (one ``[uuid, seq, outcome]`` per
well-formed report) goes back to the calling daemon.
"""

from __future__ import annotations

import logging
from typing import Any

import oslo_messaging

from computed.providers.report import API_VERSION, Limits, admit, brief
from computed.reporter.applier import ReportApplier

LOG = logging.getLogger(__name__)


class ReporterEndpoint:
    """Bounds each ``apply_reports`` call, then dispatches it to the applier."""

    target = oslo_messaging.Target(version=API_VERSION)
    rpc_methods = frozenset({"apply_reports"})  # all the bus may call (computed.runtime.rpc)

    def __init__(self, applier: ReportApplier, limits: Limits):
        self._applier = applier
        self._limits = limits

    def apply_reports(self, ctxt: Any, reports: Any = None, **unknown: Any) -> list[list[Any]]:
        if unknown:
            # oslo.messaging would otherwise fail the call with a TypeError and a traceback.
            return self._applier.drop(f"unknown argument(s) {', '.join(sorted(unknown))}")
        if not isinstance(reports, list):
            return self._applier.apply(reports)  # the applier refuses it in its own words
        admission = admit(reports, self._limits)
        for line in admission.refused:
            LOG.error("dropping oversized %s", line)
        if admission.deferred:
            first = reports[0].get("host") if isinstance(reports[0], dict) else None
            LOG.warning("a call with %d reports (the first from host %s) is over [reporter] "
                        "max_reports_per_call = %d: the %d past it are answered failed and will "
                        "be sent again", len(reports), brief(first), self._limits.max_reports,
                        admission.deferred)
        return admission.answers + self._applier.apply(admission.admitted)
