"""``computed-reporter``: placeholder for the reporter service.

Parses and validates the configuration like every computed program, then
says the service does not exist yet: it is built in issue 5.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import NoReturn

from computed.cmd import common
from computed.conf import loader

PROG = 'computed-reporter'


def _body(argv: Sequence[str]) -> int:
    loader.load(argv, PROG)
    print(f'{PROG}: the reporter service is not built yet (issue 5)',
          file=sys.stderr)
    return 1


def main(argv: Sequence[str] | None = None) -> NoReturn:
    common.run(PROG, lambda: _body(sys.argv[1:] if argv is None else argv))
