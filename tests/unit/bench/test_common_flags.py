"""bench/common.arguments: the flags every stack benchmark takes; ``--placement-workers`` is 1
unless asked, and at least 1."""

from __future__ import annotations

import pytest

from bench.common import arguments


def test_placement_workers_flag():
    parser = arguments("a benchmark")
    assert parser.parse_args([]).placement_workers is None  # stack_for starts 1
    assert parser.parse_args(["--placement-workers", "2"]).placement_workers == 2
    with pytest.raises(SystemExit):
        parser.parse_args(["--placement-workers", "0"])
