"""A previous release of computed in a virtualenv of its own, for the upgrade test.

Owns how the upgrade test gets the code it upgrades from: the source tree of a commit of this
clone (``git archive``, so neither the working tree nor the caller's checkout changes), installed
(not editable) into a virtualenv under the cache directory (``$COMPUTED_CACHE_DIR``, default
``~/.cache/computed``), in a folder named after the full commit hash and a digest of the Python
that built it and of the constraints it was installed with.

The constraints are the versions of every distribution installed where this module runs (main's
``.venv``), computed itself left out: the previous release meets the same libraries as main, so
whatever differs between the two releases in the test is computed's code, not a library that
moved since. A requirement the previous release has and main does not (eventlet before 0.2.0 is
installed in main too, as oslo.service's dependency) is resolved by pip as that release asks.

Guarantees: a virtualenv is used only once it is complete (a marker file written last); two
processes asking for the same one at once build it once (an flock on a lock file); a commit this
clone does not have is one clear error naming it, before anything is built.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import io
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from computed.testing import venvs
from computed.testing.process import ServiceError, run

COMPLETE = ".complete"


def repository() -> Path:
    """The root of the git clone this computed was imported from."""
    here = Path(__file__).resolve().parent
    try:
        out = run(["git", "-C", str(here), "rev-parse", "--show-toplevel"],
                  "finding the git clone of computed")
    except (ServiceError, FileNotFoundError) as exc:
        raise ServiceError(f"computed at {here} is not in a git clone: the upgrade test takes "
                           f"the previous release from one ({exc})") from None
    return Path(out.strip())


def resolve(ref: str, repo: Path | None = None) -> str:
    """The full commit hash of ``ref`` (a tag, a branch or a hash) in ``repo``."""
    repo = repo or repository()
    proc = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet",
                           f"{ref}^{{commit}}"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise ServiceError(f"release {ref!r} is not a commit of the clone at {repo}: fetch its "
                           f"tag or deepen the clone (git fetch --tags --unshallow)")
    return proc.stdout.strip()


def constraints() -> list[str]:
    """``name==version`` of every distribution installed here, computed's own left out."""
    pins = {}
    for dist in importlib.metadata.distributions():
        name = (dist.metadata["Name"] or "").lower().replace("_", "-")
        if name and name not in ("computed", "pip", "setuptools", "wheel"):
            pins[name] = f"{name}=={dist.version}"
    return sorted(pins.values())


def ensure(ref: str, repo: Path | None = None) -> Path:
    """The path of a complete virtualenv holding computed as of ``ref``; built on first use."""
    repo = repo or repository()
    commit = resolve(ref, repo)
    python = venvs.base_python()
    pins = constraints()
    digest = hashlib.sha256("\n".join([python, sys.version, *pins]).encode()).hexdigest()
    root = venvs.cache_dir() / "releases"
    root.mkdir(parents=True, exist_ok=True)
    target = root / f"computed-{commit[:12]}-{digest[:12]}"
    with open(root / f"computed-{commit[:12]}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / COMPLETE).exists():
            return target
        shutil.rmtree(target, ignore_errors=True)
        source = target / "src"
        source.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", commit],
                                 capture_output=True)
        if archive.returncode != 0:
            raise ServiceError(f"git archive {commit} failed: "
                               f"{archive.stderr.decode(errors='replace').strip()}")
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(source, filter="data")
        (target / "constraints.txt").write_text("\n".join(pins) + "\n")
        run([python, "-m", "venv", str(target)], f"creating the virtualenv of computed {commit}")
        pip = [str(target / "bin" / "python"), "-m", "pip", "install", "--quiet",
               "--disable-pip-version-check"]
        run(pip + ["--upgrade", "pip"], f"upgrading pip in {target}")
        run(pip + ["-c", str(target / "constraints.txt"), str(source)],
            f"installing computed {commit} into {target}", timeout=1200)
        (target / "commit").write_text(commit + "\n")
        (target / COMPLETE).write_text(commit + "\n")
    return target
