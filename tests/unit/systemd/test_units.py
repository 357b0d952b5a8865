"""The systemd units in etc/systemd: their essential settings (systemd's own verification, a
process, is tests/process/test_systemd_analyze.py)."""

from __future__ import annotations

import configparser
from pathlib import Path

import pytest

from computed.conf import fleet

UNITS = Path(__file__).resolve().parents[3] / "etc" / "systemd"
NAMES = ("computed.service", "computed-reporter.service", "computed-api.service")
INSTALL_PREFIX = "/usr/local/bin/"


def parse(name: str) -> configparser.ConfigParser:
    # strict=False: systemd allows a key more than once (After=, SystemCallFilter=); the parser
    # keeps the last value, enough for the checks below.
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # systemd keys are case-sensitive
    parser.read(UNITS / name)
    return parser


def seconds(value: str) -> int:
    assert value.endswith("s") and value[:-1].isdigit(), value
    return int(value[:-1])


@pytest.mark.parametrize("name", NAMES)
def test_unit_essentials(name):
    service = parse(name)["Service"]
    script = name.removesuffix(".service")
    assert service["Type"] == "notify"
    assert service["ExecStart"] == (f"{INSTALL_PREFIX}{script} "
                                    "--config-file /etc/computed/computed.conf")
    assert service["User"] == "computed"
    assert service["Restart"] == "on-failure"
    assert service["RestartPreventExitStatus"] == "2"  # bad configuration: no restart loop
    assert service["KillSignal"] == "SIGTERM"
    for key, value in {"NoNewPrivileges": "yes", "ProtectSystem": "strict",
                       "ProtectHome": "yes", "PrivateTmp": "yes"}.items():
        assert service[key] == value, key
    # ProtectSystem=strict leaves only these writable.
    assert service["StateDirectory"] == "computed"
    assert service["LogsDirectory"] == "computed"
    assert parse(name)["Install"]["WantedBy"] == "multi-user.target"


def test_daemon_stop_timeout_covers_the_drain():
    service = parse("computed.service")["Service"]
    drain = next(o for o in fleet.ALL_OPTS if o.name == "drain_timeout").default
    # The daemon drains for drain_timeout, then waits up to 10 s for its threads and 5 s more
    # for closing (computed/cmd/daemon.py); systemd must not kill it before.
    assert seconds(service["TimeoutStopSec"]) >= drain + 30


def test_daemon_keeps_two_malloc_arenas():
    # Measured in the unit's comment: fewer arenas kept by a daemon of many threads.
    assert parse("computed.service")["Service"]["Environment"] == "MALLOC_ARENA_MAX=2"
