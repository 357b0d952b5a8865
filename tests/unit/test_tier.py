"""The unit tier starts no process (tests/unit/conftest.py): a test that tries is stopped at the
call, told where such a test belongs."""

import os
import subprocess

import pytest

from tests.unit.conftest import ProcessStarted


def test_a_unit_test_cannot_start_a_process():
    with pytest.raises(ProcessStarted, match='move the test to tests/process'):
        subprocess.run(['true'], check=True)
    with pytest.raises(ProcessStarted):
        os.system('true')
