"""computed.testing.releases against this clone (git runs as a process): a release is found by
any name of its commit, an unknown one is one line naming it, and the constraints the previous
release is installed with are main's versions, computed's own left out. Building the virtualenv
itself is the upgrade test's (tools/run-upgrade-test), minutes long."""

from __future__ import annotations

import pytest

from computed import version
from computed.testing import releases
from computed.testing.process import ServiceError


def test_the_previous_release_resolves_by_short_and_full_hash():
    full = version.PREVIOUS_RELEASE.commit
    assert releases.resolve(full[:7]) == full
    assert releases.resolve(full) == full


def test_an_unknown_release_is_one_error_naming_it():
    with pytest.raises(ServiceError, match="release 'no-such-release' is not a commit"):
        releases.resolve("no-such-release")


def test_constraints_pin_what_is_installed_here_but_computed():
    pins = releases.constraints()
    names = {pin.split("==")[0] for pin in pins}
    assert "computed" not in names and "pip" not in names
    assert {"oslo.messaging", "tooz", "kazoo", "sqlalchemy"} <= names
    assert all("==" in pin for pin in pins)
