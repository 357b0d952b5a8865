"""Chaos runs start their own stack (a private RabbitMQ they may restart) and network namespaces;
they are functional tests (real services)."""

from __future__ import annotations

from pathlib import Path

import pytest


def pytest_collection_modifyitems(items):
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.functional)
