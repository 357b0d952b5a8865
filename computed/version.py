"""computed's release version: kept by hand, here and only here; and the release before it.

Owns the one string every part of computed says its version with: setup.cfg reads it
(``version = attr: computed.version.VERSION``), so the built package's metadata, ``--version`` of
every console script, the ``computed_build_info`` metric and the version each service publishes in
ZooKeeper (:mod:`computed.upgrade.records`) cannot disagree. Kept by hand rather than derived
from git tags (pbr, setuptools-scm): a clone without tags, a tarball or a CI checkout would
otherwise say ``0.0.1.devN``, and the version an upgrade check compares must mean the same on
every host. PEP 440: ``X.Y.Z`` for a release, ``X.Y.Z.devN`` on main between releases.

Also owns :data:`PREVIOUS_RELEASE`, the release this code is upgraded from: its version, the
commit tagged with it and its schema head. It is written here as well as in the git tag because
a tag does not travel with every copy of the tree (a tarball, a shallow CI clone): the schema
checker (:mod:`computed.upgrade.migrations`: every revision after that head must be an
expansion), ``computed-status upgrade check`` and the two-release upgrade test read it from here.
A release moves it: when ``X.Y.Z`` is tagged, ``PREVIOUS_RELEASE`` becomes ``X.Y.Z`` on main.
"""

from __future__ import annotations

from typing import NamedTuple


class Release(NamedTuple):
    version: str
    #: The full commit the git tag ``version`` points at.
    commit: str
    #: The newest Alembic revision that release ships.
    schema_head: str


#: 0.1.0 is the first release; main is the next one in the making.
VERSION = '0.2.0.dev0'

#: The release main upgrades from (``git tag 0.1.0``: the commit issue 25 started from).
PREVIOUS_RELEASE = Release(version='0.1.0', commit='8ac196719600672639ff8c41904bdbd0559b9552',
                           schema_head='0004')
