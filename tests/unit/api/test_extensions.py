"""/extensions in-process: Nova's fixed list of v2.1 extensions, read by anyone authenticated
(Tempest's ExtensionsTest looks up ``Hosts`` and ``os-consoles``)."""

from __future__ import annotations

from computed.api import extensions
from tests.unit.api.test_app import error_of

FIELDS = {'alias', 'name', 'description', 'links', 'namespace', 'updated'}


def test_the_list_is_novas_aliases_and_names_for_any_user(api):
    listed = api.as_('bob:p2')('GET', '/v2.1/extensions')
    assert listed.status_int == 200, listed.text
    documents = listed.document['extensions']
    assert len(documents) == 99  # Nova's list, frozen since 2.1
    assert all(set(d) == FIELDS for d in documents)
    names = {d['alias']: d['name'] for d in documents}
    assert names['os-hosts'] == 'Hosts' and names['os-consoles'] == 'Consoles'
    assert [d['alias'] for d in documents] == sorted(names, key=lambda a: (a.lower() == a, a))
    # Not a statement of what computed serves, and each says so.
    assert all('not a statement of what computed serves' in d['description']
               for d in documents)


def test_an_alias_is_shown_and_an_unknown_one_is_a_404(api):
    shown = api('GET', '/v2.1/extensions/os-consoles')
    assert shown.status_int == 200, shown.text
    assert shown.document == {'extension': extensions.CATALOGUE['os-consoles']}
    assert error_of(api('GET', '/v2.1/extensions/os-nothing'), 404)[1] == \
        'Extension os-nothing could not be found.'
    # At Nova's v2.0 too.
    assert api('GET', '/v2/extensions/os-hosts').document['extension']['name'] == 'Hosts'
