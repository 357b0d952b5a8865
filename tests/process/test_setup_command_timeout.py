"""computed.testing.process.run: a setup command that never answers is a one-line error naming
it (the chaos run's ``epmd -kill`` on a port that was not epmd's raised a bare TimeoutExpired)."""

from __future__ import annotations

import pytest

from computed.testing import process


def test_a_setup_command_that_never_answers_is_a_one_line_error():
    with pytest.raises(process.ServiceError, match=r"^sleep: no answer after 0.2s$"):
        process.run(["sleep", "5"], "sleep", timeout=0.2)
