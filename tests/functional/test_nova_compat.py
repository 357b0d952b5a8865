"""Builds land where Nova would put them (issue 26): computed's scheduling against Nova's own
filter and weigher classes, from the ``nova`` package, on one node set.

Nova is not a dependency of computed: the test builds a virtualenv with Nova in it once
(cached like the services', :mod:`computed.testing.venvs`) and runs
``tests/functional/nova_compare.py`` there, with the repository on the path, as an operator's
deployment would have computed and Nova installed side by side. That script prints, per case,
Nova's decision (its filter and weight handlers, ComputeCapabilitiesFilter, JsonFilter, RAMWeigher
and a downstream weigher derived from Nova's BaseHostWeigher) and computed's (Placement's traits,
then its pipeline), and the same with Nova's filter classes loaded into computed by dotted path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from computed.testing import nova, venvs

ROOT = Path(__file__).resolve().parents[2]
NODES = 300


@pytest.fixture(scope='module')
def comparison():
    if sys.version_info < (3, 11):
        pytest.skip('Nova 34 needs Python 3.11 or later')
    # The virtualenv of bench.nova_bench's Nova (computed.testing.nova): one Nova on the machine.
    venv = venvs.ensure('nova', nova.REQUIREMENTS)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run([str(venv / 'bin' / 'python'), '-m', 'tests.functional.nova_compare',
                             str(NODES)], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout)


def test_operators_answer_as_novas(comparison):
    differing = [case for case in comparison['operators'] if case['nova'] != case['computed']]
    assert differing == []
    assert all(case['nova'] == case['expected'] for case in comparison['operators'])


def test_builds_land_where_nova_would_put_them(comparison):
    for case in comparison['cases']:
        label = f"specs {case['specs']} hints {case['hints']}"
        assert case['computed'] == case['nova'], label
        assert case['computed_first'] == case['nova_first'], label
    # The node set and the cases are not degenerate: some pass, some are refused, some none.
    sizes = [len(case['nova']) for case in comparison['cases']]
    assert 0 in sizes and max(sizes) == NODES and any(0 < s < NODES for s in sizes)


def test_novas_own_filter_classes_run_unchanged_in_computed(comparison):
    for case in comparison['cases']:
        label = f"specs {case['specs']} hints {case['hints']}"
        assert case['nova_classes_in_computed'] == case['nova'], label
        assert case['nova_classes_in_computed_first'] == case['nova_first'], label
        assert case['refused_with_errors'] == [], label


def test_exact_capabilities_were_decided_by_placement(comparison):
    uefi = [case for case in comparison['cases']
            if case['specs'] == {'capabilities:boot_mode': 'uefi'} and not case['hints']]
    (case,) = uefi
    # Placement returned only the uefi nodes; the filters had nothing left to refuse.
    assert case['placement_candidates'] == len(case['nova']) < NODES
