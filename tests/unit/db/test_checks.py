"""computed's database modules on sqlite: the backend-neutral checks (see checks.py)."""

import pytest

from tests.unit.db import checks


@pytest.mark.parametrize("check", checks.ALL, ids=lambda check: check.__name__[len("check_"):])
def test_check(engine, check):
    check(engine)
