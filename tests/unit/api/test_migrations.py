"""/os-migrations in-process: none on bare metal, an admin's list, Nova's query checks from
2.59 (Tempest's MigrationsAdminTest.test_list_migrations answered 404)."""

from __future__ import annotations

import pytest

from tests.unit.api.test_app import ADMIN, error_of


def test_an_admin_lists_no_migrations_and_others_are_refused(api):
    listed = api.as_(ADMIN)('GET', '/v2.1/os-migrations')
    assert (listed.status_int, listed.document) == (200, {'migrations': []})
    assert error_of(api('GET', '/v2.1/os-migrations'), 403)[1].startswith('Policy ')


def test_below_2_59_any_query_is_taken(api):
    admin = api.as_(ADMIN, version='2.58')
    for query in ('host=c1&status=done', 'anything=1', 'marker=m'):
        assert admin('GET', f'/v2.1/os-migrations?{query}').document == {'migrations': []}


@pytest.mark.parametrize('query, said', [
    ('anything=1', 'anything'),
    ('limit=x', 'limit'),
    ('limit=-1', 'limit'),
    ('changes-since=yesterday', 'changes-since'),
    ('marker=12', 'Marker 12 could not be found.'),
])
def test_from_2_59_novas_query_checks_are_400s(api, query, said):
    admin = api.as_(ADMIN, version='2.59')
    assert said in error_of(admin('GET', f'/v2.1/os-migrations?{query}'), 400)[1]


def test_from_2_59_novas_parameters_are_taken(api):
    admin = api.as_(ADMIN, version='2.59')
    query = ('hidden=0&host=c1&instance_uuid=x&source_compute=c1&status=done&'
             'migration_type=resize&limit=10&changes-since=2026-11-01T00:00:00Z')
    assert admin('GET', f'/v2.1/os-migrations?{query}').document == {'migrations': []}
