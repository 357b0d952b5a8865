"""The name filter of GET /servers: Python's regular expressions, matched without
backtracking (computed/api/name_filter.py)."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from computed.api import name_filter

PIECES = ['a', 'b', '-', '.', '.*', 'a*', 'b+', 'a?', '(a|b)', '[ab]', '[^a]', '^', '$',
          '\\d', '\\w', 'a{2}', '(ab)*', 'x', '(a|)', '[0-9]{1,3}', '(?:a|b-)+']


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=6),
       st.text(alphabet='ab-x1', max_size=12))
def test_it_matches_what_python_finds(pieces, name):
    pattern = ''.join(pieces)
    try:
        re.compile(pattern)
    except re.error:
        return
    assert name_filter.compile_filter(pattern).matches(name) == \
        bool(re.search(pattern, name)), (pattern, name)


@pytest.mark.parametrize('pattern, name, found', [
    ('^web-[0-9]+$', 'web-12', True), ('^web-[0-9]+$', 'web-12x', False),
    ('(?i)WEB', 'my-web', True), ('eb-1', 'web-1', True), ('^$', '', True),
    ('^$', None, True), ('x', None, False)])
def test_examples(pattern, name, found):
    assert name_filter.compile_filter(pattern).matches(name) is found


@pytest.mark.parametrize('pattern', ['(a+)+$', '(a|a)*b', '(a*)*b', '(.*a){12}', '(\\w+\\s?)*$'])
def test_a_pattern_that_makes_python_backtrack_costs_linear_time(pattern):
    name = 'a' * 255 + '!'
    compiled = name_filter.compile_filter(pattern)
    started = time.monotonic()
    for _ in range(20):
        compiled.matches(name)
    assert time.monotonic() - started < 2
    assert compiled.spent < 20 * 256 * name_filter.MAX_PROGRAM


@pytest.mark.parametrize('pattern, why', [
    ('(', 'not a regular expression'), ('a' * 256, 'longer than 255'),
    ('(a)\\1', 'not supported'), ('(?=a)', 'not supported'), ('a\\b', 'not supported'),
    ('a{1000}', 'too complex'), ('(?i:a)', 'group only'), ('a*+', 'not supported'),
    ('(?>a)', 'not supported'), ('a{99999999999}', 'not a regular expression')])
def test_what_cannot_be_a_filter_is_refused_saying_why(pattern, why):
    with pytest.raises(name_filter.InvalidFilter, match=why):
        name_filter.compile_filter(pattern)


@pytest.mark.parametrize('pattern, literal', [('web-1', True), ('web 1', True),
                                              ('web.1', False), ('^web', False)])
def test_literal_patterns_are_told_apart(pattern, literal):
    assert name_filter.is_literal(pattern) is literal
