"""The input limits' pure checks (computed/api/limits.py)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from computed.api import errors, limits

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda inner: st.lists(inner, max_size=3) |
                    st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=20)


def nesting(document) -> int:
    if isinstance(document, list):
        return 1 + max(map(nesting, document), default=0)
    if isinstance(document, dict):
        return 1 + max(map(nesting, document.values()), default=0)
    return 0


@given(JSON)
def test_the_depth_counted_is_the_documents(document):
    """Brackets inside strings (escaped quotes too) are not counted."""
    assert limits._depth(json.dumps(document).encode()) == nesting(document)


def test_brackets_in_strings_do_not_count():
    assert limits._depth(b'{"a": "[[[[\\"[[[", "b": ["]"]}') == 2


def test_json_body_refusals_name_the_problem():
    with pytest.raises(errors.BadRequest, match='nested deeper than 32'):
        limits.json_body(b'[' * 33 + b']' * 33)
    assert limits.json_body(b'[' * 32 + b']' * 32) is not None
    with pytest.raises(errors.BadRequest, match='NaN is not a number JSON allows'):
        limits.json_body(b'{"a": NaN}')
    with pytest.raises(errors.BadRequest, match='out of range'):
        limits.json_body(b'[1e999]')
    with pytest.raises(errors.BadRequest, match='server/metadata/k must not contain a NUL'):
        limits.json_body(b'{"server": {"metadata": {"k": "\\u0000"}}}')
    with pytest.raises(errors.BadRequest, match='a key of server'):
        limits.json_body(b'{"server": {"\\u0000": 1}}')
    with pytest.raises(errors.RequestTooLarge):
        limits.json_body(b' ' * (limits.MAX_BODY_BYTES + 1))
    with pytest.raises(errors.BadRequest, match='Malformed request body'):
        limits.json_body(b'\xff\xfe\x00')


@pytest.mark.parametrize('text', ['²', '٣', '1²', '', ' 1', '1 ', '+1', '-1', '0x1', '1.0',
                                  '12345678901', '2147483648'])
def test_query_int_takes_ascii_digits_in_range_only(text):
    with pytest.raises(errors.BadRequest, match='limit must be an integer from 0 to'):
        limits.query_int(text, 'limit')


def test_query_int_and_integer_accept_what_they_should():
    assert limits.query_int('0', 'limit') == 0
    assert limits.query_int('2147483647', 'limit') == 2**31 - 1
    assert limits.integer('-1', 'q', -1) == -1
    assert limits.integer(7, 'q', 0) == 7
    for bad in (True, 1.5, None, '2147483648', 2**31, '-2', '1e3'):
        with pytest.raises(errors.BadRequest):
            limits.integer(bad, 'q', -1)
