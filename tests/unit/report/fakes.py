"""Stand-ins for what an outbox talks to: the reporters (a Sender) and the claims (a Gate)."""

from __future__ import annotations

from computed.providers.outbox import Verdict
from computed.providers.report import Outcome
from computed.providers.state import ProviderState

U1 = "11111111-1111-1111-1111-111111111111"
U2 = "22222222-2222-2222-2222-222222222222"


def state(uuid: str = U1, reserved: int = 0) -> ProviderState:
    return ProviderState(uuid=uuid, name=uuid, resource_class="CUSTOM_GOLD", reserved=reserved)


class Reporter:
    """Answers every report with ``outcome`` (None: answers nothing), or raises while ``fail``;
    records every batch it got."""

    def __init__(self, outcome: Outcome | None = Outcome.APPLIED):
        self.outcome = outcome
        self.batches: list = []
        self.fail = False

    def send(self, batch):
        self.batches.append(batch)
        if self.fail:
            raise TimeoutError("no reporter answered")
        if self.outcome is None:
            return {}
        return {(r.uuid, r.seq): self.outcome for r in batch}


class Gate:
    """One verdict for every report (``value``), except the uuids named in ``by_uuid``."""

    def __init__(self, value: Verdict = Verdict.SEND, by_uuid: dict | None = None):
        self.value = value
        self.by_uuid = dict(by_uuid or {})
        self.asked: list[tuple[str, int]] = []

    def verdict(self, uuid: str, claim_epoch: int) -> Verdict:
        self.asked.append((uuid, claim_epoch))
        return self.by_uuid.get(uuid, self.value)
