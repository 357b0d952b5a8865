"""computed.scheduling.extra_specs_ops: every operator, with Nova's semantics."""

import pytest

from computed.scheduling import extra_specs_ops as ops
from tests.unit.scheduling.cases import CASES


@pytest.mark.parametrize('value, requirement, expected', CASES)
def test_match_as_nova(value, requirement, expected):
    assert ops.match(value, requirement) is expected


def test_every_operator_has_a_passing_and_a_failing_case():
    covered = {}
    for _value, requirement, expected in CASES:
        op = ops.operator_of(requirement)
        covered.setdefault(op, set()).add(expected)
    for op in sorted(ops.OPERATORS) + [None]:
        assert covered.get(op) == {True, False}, op


def test_numeric_operators_on_words_fail_the_node_not_the_request():
    # Nova raises ValueError here (the whole request fails); computed refuses the node only.
    assert ops.match('fast', '>= 4') is False
    assert ops.match('4', '== four') is False


def test_or_without_alternative_is_false():
    # Nova raises IndexError on a bare '<or>'.
    assert ops.match('x', '<or>') is False


def test_exact_and_operator_detection():
    assert ops.is_exact('uefi')
    assert ops.is_exact('uefi <in>')  # only the first word can be an operator
    assert not ops.is_exact(' <in> x')
    assert ops.operator_of('s>= b') == 's>='
    assert ops.operator_of('') is None


@pytest.mark.parametrize('requirement', ['<in>', '>= four', '=', '<or>', '<all-in>'])
def test_check_requirement_refuses_what_never_passes(requirement):
    with pytest.raises(ops.InvalidRequirement) as caught:
        ops.check_requirement(requirement)
    assert caught.value.requirement == requirement
    assert repr(requirement) in str(caught.value)


@pytest.mark.parametrize('requirement', ['uefi', '>= 4', '= 1.5', 's== x', '<or> a <or> b',
                                         '<all-in> a b'])
def test_check_requirement_accepts(requirement):
    ops.check_requirement(requirement)
