"""computed.version.PREVIOUS_RELEASE against this clone's history (git runs as a process): the
recorded commit is the release's, with the recorded version and schema head, and the tag, where
the clone has it, names the same commit."""

from __future__ import annotations

import pathlib
import subprocess

from computed import version

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(['git', '-C', str(ROOT), *args], capture_output=True, text=True)


def test_the_recorded_release_is_the_tagged_commit_and_its_schema_head():
    # What PREVIOUS_RELEASE says of the commit, read from the commit itself (this clone's
    # history: the tag may be missing from a copy, the commit is not in a full clone).
    previous = version.PREVIOUS_RELEASE
    assert _git('cat-file', '-e', f'{previous.commit}^{{commit}}').returncode == 0, \
        f'commit {previous.commit} is not in this clone (a shallow clone? fetch its history)'
    listed = _git('ls-tree', '--name-only', previous.commit,
                  'computed/db/migrations/versions/').stdout.split()
    heads = sorted(pathlib.PurePath(name).name.split('_')[0] for name in listed
                   if not name.endswith('__init__.py'))
    assert heads[-1] == previous.schema_head
    setup = _git('show', f'{previous.commit}:setup.cfg').stdout
    assert f'version = {previous.version}' in setup
    tag = _git('rev-parse', '--verify', '--quiet', f'{previous.version}^{{commit}}')
    if tag.returncode == 0:  # a clone that has the tag: it names the same commit
        assert tag.stdout.strip() == previous.commit
