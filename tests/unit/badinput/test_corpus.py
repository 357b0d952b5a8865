"""The bad-input corpus: every case gets one clean refusal and changes nothing.

The cases are data, next to this file, and grow with every bug found (add the case, see it fail,
fix):

* ``configs/*.conf``: a configuration overlay (``# base: good`` adds it to :data:`GOOD_CONF`,
  ``# base: none`` is the whole file) and ``# expect:`` the text of the one line. Loaded the way
  every program loads its configuration (:func:`computed.conf.loader.load`): exit 2, one line
  on stderr, no file created; a sample also runs through each console script (in-process,
  tests/cli.py).
* ``cli.txt``: ``computed-manage`` argument lists, run in-process (tests/cli.py): the exit
  status, one line on stderr, the database unchanged.
* ``reporter_payloads.json``: keyword arguments of the reporter's ``apply_reports``, called on
  :class:`computed.reporter.endpoint.ReporterEndpoint` over a real applier and sqlite database
  (Placement and ZooKeeper faked): the expected refusal (``invalid``, ``fenced``, ``stale``, or
  the whole message ``dropped``; ``a|b`` when either rule may refuse it), Placement and the
  database unchanged, no traceback logged.
* ``worker_payloads.json``: calls of the daemon's instance endpoint
  (:class:`computed.instances.worker.InstanceWorker`) over a real sqlite database: one log line
  saying why it was refused, nothing sent to the bare metal driver, the database unchanged.
"""

from __future__ import annotations

import json
import logging
import pathlib
import shlex
import shutil
import sqlite3
import time
import uuid as uuid_lib

import pytest

from computed import db
from computed.conf import loader
from computed.conf import reporter as reporter_opts
from computed.db import engine as db_engine
from computed.db import instances as db_instances
from computed.db import models
from computed.instances import lifecycle
from computed.instances.worker import InstanceWorker
from computed.providers.report import Limits
from computed.reporter.applier import ReportApplier
from computed.reporter.endpoint import ReporterEndpoint
from tests import cli
from tests.unit.instance.fakes import FakeDriver
from tests.unit.instance.fakes import FakePlacement as FakeInstancePlacement
from tests.unit.report.test_applier import FakeClaims, FakePlacement

HERE = pathlib.Path(__file__).parent
CONFIGS = sorted((HERE / 'configs').glob('*.conf'))
CLI = [line for line in (HERE / 'cli.txt').read_text().splitlines()
       if line.strip() and not line.startswith('#')]
REPORTER = json.loads((HERE / 'reporter_payloads.json').read_text())
WORKER = json.loads((HERE / 'worker_payloads.json').read_text())

GOOD_CONF = """\
[DEFAULT]
host = c1
transport_url = fake://

[coordination]
backend_url = zookeeper://127.0.0.1:2181?timeout=10

[placement]
auth_type = none
endpoint_override = http://127.0.0.1:8778

[database]
connection = sqlite:///{tmp}/computed.sqlite
"""

U1 = '11111111-1111-1111-1111-111111111111'
U2 = '22222222-2222-2222-2222-222222222222'
UA = 'aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa'


def test_the_corpus_is_at_least_as_wide_as_the_probe():
    # Issue 16: 152 bad inputs (57 configs, 29 CLI calls, 48 reporter, 18 worker payloads).
    assert (len(CONFIGS), len(CLI), len(REPORTER), len(WORKER)) >= (57, 29, 48, 18)
    assert len(CONFIGS) >= 57 and len(CLI) >= 29 and len(REPORTER) >= 48 and len(WORKER) >= 18


def dump(path: pathlib.Path) -> list[str]:
    """Everything a sqlite database holds, as SQL."""
    with sqlite3.connect(path) as conn:
        return list(conn.iterdump())


@pytest.fixture(scope='module')
def template_db(tmp_path_factory):
    """A migrated sqlite database, synced once and copied per test."""
    path = tmp_path_factory.mktemp('template') / 'computed.sqlite'
    db.sync(f'sqlite:///{path}')
    return path


@pytest.fixture
def engine_path(template_db, tmp_path):
    path = tmp_path / 'computed.sqlite'
    shutil.copy(template_db, path)
    engine = db_engine.engine_from_url(f'sqlite:///{path}')
    yield engine, path
    engine.dispose()


def one_line(stderr: str) -> str:
    assert 'Traceback' not in stderr, stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


# -- configurations ----------------------------------------------------------------------------

def config_case(path: pathlib.Path, tmp: pathlib.Path) -> tuple[str, pathlib.Path]:
    raw = path.read_bytes()
    header, _, rest = raw.partition(b'\n# base: ')
    expect = header.decode().removeprefix('# expect: ')
    base, _, overlay = rest.partition(b'\n')
    conf = tmp / 'computed.conf'
    prefix = GOOD_CONF.format(tmp=tmp).encode() + b'\n' if base == b'good' else b''
    conf.write_bytes(prefix + overlay)
    return expect, conf


@pytest.mark.parametrize('path', CONFIGS, ids=[p.stem for p in CONFIGS])
def test_config(path, tmp_path, capsys):
    expect, conf = config_case(path, tmp_path)
    before = sorted(tmp_path.iterdir())
    with pytest.raises(SystemExit) as exit_info:
        loader.load(['--config-file', str(conf)], 'computed')
    assert exit_info.value.code == 2
    line = one_line(capsys.readouterr().err)
    assert line.startswith('computed: error: ')
    assert expect in line
    assert sorted(tmp_path.iterdir()) == before  # nothing created (a sqlite file, a log)


# A few of the configurations through each program's start.
SAMPLE = [p for p in CONFIGS if p.stem.split('-', 1)[1] in (
    'option-unknown-ironic', 'url-backend-timeout-float', 'file-cafile-missing',
    'url-database-driver-missing', 'str-host-slash', 'url-backend-unknown-query-key',
    'url-transport-missing')]


@pytest.mark.parametrize('name, args', [
    ('computed', []), ('computed-reporter', []), ('computed-api', []),
    ('computed-manage', ['config', 'check']), ('computed-status', ['upgrade', 'check'])])
def test_every_program_refuses_at_start(name, args, tmp_path):
    assert len(SAMPLE) == 7
    for path in SAMPLE:
        expect, conf = config_case(path, tmp_path)
        result = cli.run(name, '--config-file', conf, *args, home=tmp_path)
        assert result.returncode == 2, (path.stem, result)
        line = one_line(result.stderr)
        assert line.startswith(f'{name}: error: ') and expect in line, path.stem


# -- computed-manage ---------------------------------------------------------------------------

@pytest.fixture(scope='module')
def cli_world(tmp_path_factory, template_db):
    tmp = tmp_path_factory.mktemp('cli')
    shutil.copy(template_db, tmp / 'computed.sqlite')
    engine = db_engine.engine_from_url(f"sqlite:///{tmp / 'computed.sqlite'}")
    names = {}
    for state in (models.ACTIVE, models.STOPPED, models.DELETED):
        row = db_instances.create_instance(
            engine, str(uuid_lib.uuid4()), 'CUSTOM_GOLD', host='c1', member_epoch=1,
            node_uuid=None if state == models.DELETED else str(uuid_lib.uuid4()), state=state)
        names[state.value.lower()] = row.uuid
    engine.dispose()
    conf = tmp / 'computed.conf'
    conf.write_text(GOOD_CONF.replace('zookeeper://127.0.0.1:2181?timeout=10',
                                      'file://{tmp}/coordination').format(tmp=tmp))
    return tmp, dict(names, conf=str(conf), missing=str(uuid_lib.uuid4()))


@pytest.mark.parametrize('case', CLI, ids=[c.split('|', 2)[2].strip() for c in CLI])
def test_cli(case, cli_world):
    tmp, names = cli_world
    status, expect, args = (part.strip() for part in case.split('|', 2))
    args = [arg.format(**names) for arg in shlex.split(args)]
    if not any(arg.startswith('--config-fil') for arg in args):
        args += ['--config-file', names['conf']]
    before = dump(tmp / 'computed.sqlite')
    result = cli.run('computed-manage', *args, home=tmp)
    assert result.returncode == int(status), result
    line = one_line(result.stderr)
    assert line.startswith('computed-manage')
    assert expect.format(**names) in line
    assert dump(tmp / 'computed.sqlite') == before


# -- the reporter's endpoint -------------------------------------------------------------------

def good_report(seq: int) -> dict:
    return {'uuid': U1, 'claim_epoch': 7, 'seq': seq, 'host': 'c1',
            'state': {'uuid': U1, 'name': U1, 'resource_class': 'CUSTOM_GOLD', 'reserved': 0,
                      'traits': []}}


def assert_clean_log(records) -> None:
    for record in records:
        assert record.exc_info is None, record.getMessage()
        assert '\n' not in record.getMessage()


def default_limits() -> Limits:
    """The reporter's limits as a default configuration sets them."""
    reporter = {opt.dest: opt.default for opt in reporter_opts.ALL_OPTS}
    return Limits(max_reports=reporter['max_reports_per_call'],
                  max_traits=reporter['max_traits'], max_chars=reporter['max_field_length'])


@pytest.mark.parametrize('case', REPORTER, ids=[c['case'] for c in REPORTER])
def test_reporter_payload(case, engine_path, caplog):
    engine, path = engine_path
    # UA is claimed too, so that only its spelling can refuse a report of it.
    placement, claims = FakePlacement(), FakeClaims({U1: 7, U2: 9, UA: 7})
    claims.hosts[U2] = 'c2'
    applier = ReportApplier(placement, claims, engine, workers=2)
    try:
        assert applier.apply([good_report(1000)]) == [[U1, 1000, 'applied']]
        before, providers = dump(path), dict(placement.providers)
        counts = dict(applier.counts)
        with caplog.at_level(logging.INFO):
            answers = ReporterEndpoint(applier, default_limits()).apply_reports(
                {}, **case['kwargs'])
    finally:
        applier.close()
    expect = case['expect']
    # "a|b": either refusal will do (the case is about refusing, not about which rule does).
    refusals = ['invalid'] if expect == 'dropped' else expect.split('|')
    if expect == 'dropped':
        assert answers == []
    assert all(outcome in refusals for _, _, outcome in answers), answers
    if not answers:  # a report too malformed to answer is still counted as refused
        assert sum(applier.counts[r] - counts.get(r, 0) for r in refusals) == 1
    assert dump(path) == before and placement.providers == providers
    assert_clean_log(caplog.records)


# -- the daemon's instance endpoint ------------------------------------------------------------

class FakeFleet:
    """Holds the claims on ``held``; act runs the operation, as Fleet.act does while allowed."""

    def __init__(self, held):
        self.held = set(held)
        self.acted = []

    def claim_for(self, node):
        return object() if node in self.held else None

    def wake(self):
        pass

    def guard(self, claim):
        # What each Ironic write checks (Fleet.guard): nothing to check in these cases, which
        # must all be refused before any write.
        return None

    def act(self, node, action, fn, instance=None):
        self.acted.append((node, action, instance))
        fn(None)
        return True


@pytest.fixture
def worker_world(engine_path):
    engine, path = engine_path
    nodes = [str(uuid_lib.uuid4()) for _ in range(4)]
    names = {}
    for name, state, node in (('active', models.ACTIVE, nodes[0]),
                              ('stopped', models.STOPPED, nodes[1]),
                              ('deleted', models.DELETED, None),
                              ('building', models.BUILDING, nodes[3]),
                              ('elsewhere', models.ACTIVE, nodes[2])):
        names[name] = db_instances.create_instance(engine, str(uuid_lib.uuid4()), 'CUSTOM_GOLD',
                                                   node_uuid=node, host='c1', member_epoch=7,
                                                   state=state).uuid
    names.update(ACTIVE=names['active'].upper(), stopped_hex=names['stopped'].replace('-', ''),
                 missing=str(uuid_lib.uuid4()))
    driver = FakeDriver(*nodes)
    owner = lifecycle.Owner(engine, driver, FakeInstancePlacement(), host='c1', member_epoch=7)
    fleet = FakeFleet([nodes[0], nodes[1], nodes[3]])
    worker = InstanceWorker(fleet, owner, workers=1, claim_wait=0.3)
    yield worker, fleet, driver, path, names
    worker.stop()


def fill(value, names):
    if isinstance(value, str):
        return value.format(**names)
    if isinstance(value, list):
        return [fill(v, names) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, names) for k, v in value.items()}
    return value


@pytest.mark.parametrize('case', WORKER, ids=[c['case'] for c in WORKER])
def test_worker_payload(case, worker_world, caplog):
    worker, fleet, driver, path, names = worker_world
    before = dump(path)
    with caplog.at_level(logging.INFO, logger='computed.instances'):
        getattr(worker, case['method'])({}, **fill(case['kwargs'], names))
        deadline = time.monotonic() + 30
        while not any(case['expect'] in r.getMessage() for r in caplog.records):
            assert time.monotonic() < deadline, [r.getMessage() for r in caplog.records]
            time.sleep(0.05)
    assert driver.calls == []
    assert dump(path) == before
    assert_clean_log(caplog.records)
