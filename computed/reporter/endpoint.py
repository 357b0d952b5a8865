"""The reporter's RPC endpoint: ``apply_reports(reports=[...])`` on the topic ``[reporter] topic``.

Owns the oslo.messaging side of the reporter and nothing else: the target's version (the
report format's :data:`computed.providers.report.API_VERSION`) and handing each batch to a
:class:`computed.reporter.applier.ReportApplier`, whose answer (one ``[uuid, seq, outcome]``
per well-formed report) goes back to the calling daemon.
"""

from __future__ import annotations

from typing import Any

import oslo_messaging

from computed.providers.report import API_VERSION
from computed.reporter.applier import ReportApplier


class ReporterEndpoint:
    """Dispatches ``apply_reports`` calls to the applier."""

    target = oslo_messaging.Target(version=API_VERSION)

    def __init__(self, applier: ReportApplier):
        self._applier = applier

    def apply_reports(self, ctxt: Any, reports: Any = None, **unknown: Any) -> list[list[Any]]:
        if unknown:
            # oslo.messaging would otherwise fail the call with a TypeError and a traceback.
            return self._applier.drop(f"unknown argument(s) {', '.join(sorted(unknown))}")
        return self._applier.apply(reports)
