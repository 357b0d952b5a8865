"""computed.testing.process.free_port: ports outside the kernel's ephemeral range, each handed
out once across the suite's processes while its claim lasts."""

from __future__ import annotations

import os
import time

import pytest

from computed.testing import process


@pytest.fixture
def claims(tmp_path, monkeypatch):
    monkeypatch.setattr(process, "PORT_CLAIMS", tmp_path)
    return tmp_path


def test_ports_are_below_the_ephemeral_range_and_bindable(claims):
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    ports = [process.free_port() for _ in range(50)]
    assert all(process.LOWEST_PORT <= port < low for port in ports)
    assert len(set(ports)) == 50
    assert sorted(int(name) for name in os.listdir(claims)) == sorted(ports)


def test_a_port_claimed_by_another_process_is_not_handed_out(claims, monkeypatch):
    monkeypatch.setattr(process, "_ports_outside_the_ephemeral_range", lambda: range(20000, 20002))
    (claims / "20000").touch()
    assert process.free_port() == 20001
    with pytest.raises(process.ServiceError, match="no free port in 20000-20001"):
        process.free_port()


def test_a_lapsed_claim_is_taken_over(claims, monkeypatch):
    monkeypatch.setattr(process, "_ports_outside_the_ephemeral_range", lambda: range(20000, 20001))
    (claims / "20000").touch()
    old = time.time() - process.PORT_CLAIM_SECONDS - 1
    os.utime(claims / "20000", (old, old))
    assert process.free_port() == 20000
    assert time.time() - (claims / "20000").stat().st_mtime < 60

