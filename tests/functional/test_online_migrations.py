"""Online data migrations and ``computed-manage db online_data_migrations`` on real servers:
PostgreSQL (the stack's) and MariaDB/MySQL (when one answers on 127.0.0.1:3306 as root without
password, as tests/functional/test_db.py), each on a fresh database: rows as the previous
release writes them are found, rewritten in batches under --max-count (exit 1, then 0), each
once, and a run after the last finds nothing. The same checks run on sqlite in the unit tier."""

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
