"""What every benchmark script shares: the machine it ran on, and its section of BENCHMARKS.md.

Each script owns one ``## `` section of BENCHMARKS.md; :func:`write_section` replaces that section
(up to the next ``## `` heading) or appends it, leaving every other section as it was. A script may
name a ``keep`` marker: hand-written notes below that marker survive the rewrite.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path


def machine_facts() -> dict:
    """nproc, CPU model (from /proc/cpuinfo) and Python version."""
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "cpu": model, "python": platform.python_version()}


def machine() -> str:
    facts = machine_facts()
    return f"nproc = {facts['nproc']}, CPU `{facts['cpu']}`, Python {facts['python']}"


def write_section(path: Path, heading: str, text: str, keep: str | None = None) -> None:
    """Put ``text`` (which starts with ``heading``) in place of the section ``heading``."""
    current = path.read_text() if path.exists() else "# Benchmarks\n"
    start = current.find(heading)
    if start < 0:
        path.write_text(current.rstrip("\n") + "\n\n" + text.rstrip("\n") + "\n")
        return
    end = current.find("\n## ", start + len(heading))
    old = current[start:end + 1] if end >= 0 else current[start:]
    tail = current[end + 1:] if end >= 0 else ""
    if keep and keep in old:
        text = text.rstrip("\n") + "\n\n" + old[old.index(keep):].strip("\n") + "\n"
    path.write_text(current[:start] + text.rstrip("\n") + "\n" + ("\n" + tail if tail else ""))
