"""The reporter's quieting of kazoo while it waits for ZooKeeper, with waits that overlap (as
reporters run in threads of one process do)."""

from __future__ import annotations

import logging

from computed.cmd.reporter import _KazooQuiet


def test_overlapping_waits_ending_out_of_order_put_the_level_back():
    logger = logging.getLogger("kazoo.client")
    before = logger.level
    logger.setLevel(logging.INFO)
    try:
        quiet = _KazooQuiet()
        first, second = quiet(), quiet()
        first.__enter__()
        assert logger.level == logging.ERROR
        second.__enter__()
        first.__exit__(None, None, None)  # the first ends while the second still waits
        assert logger.level == logging.ERROR
        second.__exit__(None, None, None)
        assert logger.level == logging.INFO
    finally:
        logger.setLevel(before)
