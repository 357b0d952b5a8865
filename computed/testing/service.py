"""The shape every launcher has, and how its state is kept between commands.

A :class:`Service` is started in a scratch directory and described by a JSON-able ``info`` dict
(PID, port, URLs). ``tools/services up`` saves the infos of a whole stack so that ``status`` and
``down``, run later from another process, find the same services again.

States: new -> started (``start`` returns only once ``ready`` answers) -> stopped. A service the
harness reused rather than started (a broker that was already running) has no PID and is left
running by ``stop``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from computed.testing import process


class Service:
    name = "service"

    def __init__(self, workdir: Path, info: dict[str, Any] | None = None):
        self.workdir = Path(workdir)
        self.info: dict[str, Any] = dict(info or {})

    @property
    def log(self) -> Path:
        return self.workdir / f"{self.name}.log"

    @property
    def pid(self) -> int | None:
        return self.info.get("pid")

    def start(self) -> None:
        raise NotImplementedError

    def ready(self) -> bool:
        raise NotImplementedError

    def stop(self) -> None:
        process.stop(self.pid)
        self.info.pop("pid", None)

    def restart(self) -> None:
        """Stop and start again on the same port and data (for failure tests)."""
        self.stop()
        self.start()

    def describe(self) -> str:
        """One line for ``tools/services status``."""
        state = "ready" if self.ready() else "DOWN"
        owner = f"pid {self.pid}" if self.pid else "reused"
        return f"{self.name:<10} {state:<6} {owner:<12} {self.url}"

    @property
    def url(self) -> str:
        return self.info.get("url", "")
