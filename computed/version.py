"""computed's release version: kept by hand, here and only here.

Owns the one string every part of computed says its version with: setup.cfg reads it
(``version = attr: computed.version.VERSION``), so the built package's metadata, ``--version`` of
every console script, the ``computed_build_info`` metric and the version each service publishes in
ZooKeeper (:mod:`computed.upgrade.records`) cannot disagree. Kept by hand rather than derived
from git tags (pbr, setuptools-scm): a clone without tags, a tarball or a CI checkout would
otherwise say ``0.0.1.devN``, and the version an upgrade check compares must mean the same on
every host. PEP 440: ``X.Y.Z`` for a release, ``X.Y.Z.devN`` on main between releases.
"""

from __future__ import annotations

#: 0.1.0 is the first release; main is the next one in the making.
VERSION = '0.2.0.dev0'
