"""Online data migrations, ``computed-manage db online_data_migrations`` and the upgrade check's
database lines on real servers: PostgreSQL (the stack's) and MariaDB/MySQL (when one answers on
127.0.0.1:3306 as root without password, as tests/functional/test_db.py), each on a fresh
database: rows as the previous release writes them are found, rewritten in batches under
--max-count (exit 1, then 0), each once, and a run after the last finds nothing; the schema
matches the code on both (schema vs code reflects each backend its own way). The migrations'
checks also run on sqlite in the unit tier."""

from __future__ import annotations

import socket
import uuid

import pytest
import sqlalchemy as sa

from tests import cli
from tests.unit.upgrade import online

MYSQL = 'mysql+pymysql://root@127.0.0.1:3306'


def _mysql_answers() -> bool:
    try:
        with socket.create_connection(('127.0.0.1', 3306), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture(params=['postgresql', 'mysql'])
def url(request, stack):
    name = f'online_{uuid.uuid4().hex[:8]}'
    if request.param == 'postgresql':
        url = stack['postgres'].create_database(name)
        stack.save()
        yield url
        return
    if not _mysql_answers():
        pytest.skip('no MySQL/MariaDB on 127.0.0.1:3306')
    admin = sa.create_engine(f'{MYSQL}/mysql', isolation_level='AUTOCOMMIT')
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE `{name}`')
        yield f'{MYSQL}/{name}?charset=utf8mb4'
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS `{name}`')
        admin.dispose()


def test_the_real_migrations(url):
    online.check_real_migrations(url)


def test_the_command(url, stack, tmp_path):
    conf = tmp_path / 'computed.conf'
    conf.write_text(stack.computed_conf(host='online-host', database=url))

    def manage(*args):
        return cli.run('computed-manage', '--config-file', conf, 'db', *args, home=tmp_path)

    online.check_command(url, manage)


def test_the_upgrade_checks_of_the_database(url, stack, tmp_path):
    # Schema vs code compares the live schema with the models, which each backend reflects in
    # its own way: a synced database matches on both, and the rows 0.1.0 left are counted.
    from computed import db
    from computed.db import engine as db_engine
    db.sync(url)
    engine = db_engine.engine_from_url(url)
    try:
        online.old_instances(engine, 2)
    finally:
        engine.dispose()
    conf = tmp_path / 'computed.conf'
    conf.write_text(stack.computed_conf(host='online-host', database=url))
    result = cli.run('computed-status', '--config-file', conf, 'upgrade', 'check', home=tmp_path)
    lines = result.stdout.splitlines()
    assert f'Database schema: Success: at head ({db.head_revision()})' in lines, result.stdout
    assert 'Schema changes: Success: the revisions since 0.1.0 only expand' in lines
    assert ("Data migrations: Warning: rows left to migrate (instance_reservation_ids: 2): once "
            "every service runs this release, run 'computed-manage db online_data_migrations'"
            in lines)
