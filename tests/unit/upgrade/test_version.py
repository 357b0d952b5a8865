"""The package's version: kept by hand in computed/version.py, said by --version and metrics."""

from __future__ import annotations

import configparser
import importlib.metadata
import pathlib

from packaging.version import Version
from prometheus_client import generate_latest

from computed import version
from computed.conf import loader
from computed.runtime import metrics

ROOT = pathlib.Path(__file__).resolve().parents[3]


def test_the_version_is_pep440_and_kept_in_one_place():
    Version(version.VERSION)  # raises on anything pip would not order
    setup = configparser.ConfigParser()
    setup.read(ROOT / 'setup.cfg')
    # setup.cfg reads it from the module, so the installed metadata cannot disagree with it.
    assert setup['metadata']['version'] == 'attr: computed.version.VERSION'


def test_the_installed_metadata_says_the_same():
    # tools/bootstrap reinstalls when setup.cfg changes; a bumped VERSION needs it too.
    assert importlib.metadata.version('computed') == version.VERSION


def test_console_scripts_print_it(capsys):
    try:
        loader.load(['--version'], 'computed')
    except SystemExit as exc:
        assert exc.code == 0
    assert capsys.readouterr().out.strip() == version.VERSION


def test_metrics_say_it():
    class Nothing:
        def collect(self):
            return []

    text = generate_latest(metrics.registry(Nothing())).decode()
    assert f'computed_build_info{{version="{version.VERSION}"}} 1.0' in text


def test_the_previous_release_is_older_and_its_schema_head_is_a_revision():
    from alembic.script import ScriptDirectory

    from computed import db
    previous = version.PREVIOUS_RELEASE
    assert Version(previous.version) < Version(version.VERSION)
    assert len(previous.commit) == 40 and int(previous.commit, 16) >= 0
    scripts = ScriptDirectory.from_config(db.alembic_config())
    # A revision this code ships, and an ancestor of its head (upgrades go through it).
    assert previous.schema_head in {script.revision
                                    for script in scripts.walk_revisions()}

