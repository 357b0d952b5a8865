"""The systemd units in etc/systemd verified by systemd itself (``systemd-analyze verify``) when
it is installed; their essential settings are checked in any case by
tests/unit/systemd/test_units.py."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.unit.systemd.test_units import INSTALL_PREFIX, NAMES, UNITS


def test_systemd_analyze_verify(tmp_path):
    tool = shutil.which("systemd-analyze")
    if tool is None:
        # The essentials above still ran; say loudly what was not checked.
        pytest.skip("systemd-analyze is not installed: units parsed, not verified by systemd")
    # verify checks that ExecStart= is executable: point it at stand-ins for the console scripts.
    for name in NAMES:
        script = tmp_path / name.removesuffix(".service")
        script.write_text("#!/bin/sh\n")
        script.chmod(0o755)
        text = (UNITS / name).read_text().replace(INSTALL_PREFIX, f"{tmp_path}/")
        (tmp_path / name).write_text(text)
    result = subprocess.run([tool, "verify", *(f"./{n}" for n in NAMES)], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)
    # Unknown or misspelt keys are only warnings to systemd (exit 0): any output fails the test.
    assert result.returncode == 0 and not (result.stdout + result.stderr).strip(), \
        result.stdout + result.stderr
