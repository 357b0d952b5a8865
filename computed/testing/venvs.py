"""Virtualenvs for the OpenStack services, built once and reused.

Placement and Ironic pin their own versions of the oslo libraries, so each gets a virtualenv of its
own, apart from computed's. A virtualenv lives under the cache directory (``$COMPUTED_CACHE_DIR``,
default ``~/.cache/computed``) in a folder named after a digest of its requirements and of the
Python that built it: changing a requirement builds a new one, anything else reuses the old one.

Guarantees: a virtualenv is used only once it is complete (a marker file is written last), and two
processes asking for the same one at once build it once (an flock on a lock file). The same holds
for what :func:`made_once` makes beside a virtualenv (a service's empty database, its keys), which
each start of the service copies instead of running the service's setup commands again.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from computed.testing.process import run

COMPLETE = ".complete"


def cache_dir() -> Path:
    return Path(os.environ.get("COMPUTED_CACHE_DIR", Path.home() / ".cache" / "computed"))


def base_python() -> str:
    """The interpreter to build service virtualenvs with (never one inside a virtualenv)."""
    return os.environ.get("COMPUTED_SERVICE_PYTHON") or getattr(sys, "_base_executable", None) \
        or sys.executable


def ensure(name: str, requirements: Sequence[str]) -> Path:
    """The path of a complete virtualenv called ``name`` holding ``requirements``."""
    python = base_python()
    digest = hashlib.sha256("\n".join([python, sys.version, *requirements]).encode()).hexdigest()
    root = cache_dir() / "venvs"
    root.mkdir(parents=True, exist_ok=True)
    target = root / f"{name}-{digest[:12]}"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / COMPLETE).exists():
            return target
        shutil.rmtree(target, ignore_errors=True)
        run([python, "-m", "venv", str(target)], f"creating the {name} virtualenv")
        pip = [str(target / "bin" / "python"), "-m", "pip", "install", "--quiet",
               "--disable-pip-version-check"]
        run(pip + ["--upgrade", "pip"], f"upgrading pip in the {name} virtualenv")
        run(pip + list(requirements), f"installing {' '.join(requirements)} into {target}",
            timeout=1200)
        (target / COMPLETE).write_text("\n".join(requirements) + "\n")
    return target


def made_once(venv: Path, make: Callable[[Path], None], kind: str = "template") -> Path:
    """A folder beside the virtualenv ``venv`` that ``make(folder)`` filled, once per virtualenv
    and ``kind`` (workers and runs share it): used only once complete, made again when a run
    left it half made, made once when processes ask at once."""
    folder = venv.parent / f"{venv.name}.{kind}"
    with open(venv.parent / f"{venv.name}.{kind}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (folder / COMPLETE).exists():
            return folder
        shutil.rmtree(folder, ignore_errors=True)  # a half-made one
        folder.mkdir(parents=True)
        make(folder)
        (folder / COMPLETE).write_text("")
    return folder
