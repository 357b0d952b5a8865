"""The documentation's commands of other programs than computed's console scripts, run for real:
the OpenStack client's and oslo-config-generator's, tools/run-local's and tools/services'
``--help``, ``python -m MODULE --help`` (tests/unit/docs/test_docs.py checks the rest of each
block, in-process, and names these commands with ``spawns``)."""

import pytest

from tests.unit.docs.snippets import commands
from tests.unit.docs.test_docs import SHELL, check_command, ids, spawns

FOREIGN = [b for b in SHELL if any(spawns(list(words)) for words in commands(b))]


@pytest.mark.parametrize("block", FOREIGN, ids=ids(FOREIGN))
def test_every_command_of_another_program_works(block):
    for words in commands(block):
        if not spawns(list(words)):
            continue
        try:
            check_command(list(words))
        except AssertionError as exc:
            raise AssertionError(f"{block.where}: {' '.join(words)}: {exc}") from None
