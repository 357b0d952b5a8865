"""Nova's extra-spec operators: does a host's value satisfy a flavor's requirement string.

Owns the semantics of the requirement strings a flavor's ``capabilities:<key>`` extra specs (and
aggregate metadata) use, as Nova's ``nova.scheduler.filters.extra_specs_ops`` defines them, so a
flavor written for Nova's ComputeCapabilitiesFilter selects the same nodes here. Pure: no I/O, no
logging.

A requirement is words separated by white space; the first word may be an operator:

* no operator: ``v`` equals the whole requirement string (``uefi``);
* ``=``: ``float(v) >= float(arg)``, "at least" (``= 4``);
* ``==``, ``!=``, ``>=``, ``<=``: ``float(v)`` compared with ``float(arg)`` (``>= 4``);
* ``s==``, ``s!=``, ``s>=``, ``s>``, ``s<=``, ``s<``: ``v`` compared with ``arg`` as strings
  (``s== uefi``);
* ``<in>``: ``arg`` is a substring of ``v`` (``<in> avx2``);
* ``<all-in>``: every following word is a substring of ``v`` (``<all-in> avx2 aes``);
* ``<or>``: ``v`` equals one of the alternatives (``<or> uefi <or> bios``).

As in Nova: a requirement whose first word is not an operator is an exact match of the whole
string (so ``uefi`` and ``s== uefi`` differ only for multi-word values); an operator with no
argument never passes; a missing value (None) passes no requirement; single-argument operators
read only the first argument (``s== a b`` compares with ``a``); ``<or>`` takes every other word
after it as an alternative (the words in between are read as the ``<or>`` keywords, whatever
they are).

Where computed differs from Nova, on purpose: a numeric operator meeting a value or argument that
is not a number answers False (Nova's ``float()`` raises, which fails the whole scheduling
request); ``<or>`` with no alternative answers False (Nova raises IndexError). Both cases can only
exclude a node, never admit one Nova would have refused. :func:`check_requirement` refuses such
requirements when a flavor's extra spec is set, so they are rare in practice.
"""

from __future__ import annotations

import operator
from collections.abc import Callable

OR = '<or>'
ALL_IN = '<all-in>'


def _number(text: str) -> float:
    return float(text)


def _numeric(compare: Callable[[float, float], bool]) -> Callable[[str, str], bool]:
    def check(value: str, argument: str) -> bool:
        try:
            return compare(_number(value), _number(argument))
        except ValueError:
            # Nova raises here and the request fails; a node whose value is not a number
            # simply does not satisfy a numeric requirement.
            return False
    return check


#: operator -> check(host value, first argument); ``<or>`` and ``<all-in>`` are special.
_CHECKS: dict[str, Callable[[str, str], bool]] = {
    '=': _numeric(operator.ge),  # Nova's '=' means "at least", as for RAM or CPU counts
    '==': _numeric(operator.eq),
    '!=': _numeric(operator.ne),
    '>=': _numeric(operator.ge),
    '<=': _numeric(operator.le),
    's==': operator.eq,
    's!=': operator.ne,
    's>=': operator.ge,
    's>': operator.gt,
    's<=': operator.le,
    's<': operator.lt,
    '<in>': lambda value, argument: argument in value,
}

#: Every operator Nova's extra-spec matching understands.
OPERATORS = frozenset(_CHECKS) | {OR, ALL_IN}
#: The operators that compare numbers (their arguments must be numbers).
NUMERIC_OPERATORS = frozenset({'=', '==', '!=', '>=', '<='})


class InvalidRequirement(ValueError):
    """A requirement string that can never be satisfied; the message names it."""

    def __init__(self, requirement: str, reason: str):
        self.requirement = requirement
        super().__init__(f'requirement {requirement!r}: {reason}')


def operator_of(requirement: str) -> str | None:
    """The operator a requirement starts with; None for an exact match."""
    words = requirement.split()
    if words and words[0] in OPERATORS:
        return words[0]
    return None


def is_exact(requirement: str) -> bool:
    """Whether the requirement is an exact match of the whole string (no operator)."""
    return operator_of(requirement) is None


def match(value: str | None, requirement: str) -> bool:
    """Whether a host's ``value`` satisfies ``requirement`` (semantics in the module
    docstring)."""
    words = requirement.split()
    op = words[0] if words else None
    if op not in OPERATORS:
        return value == requirement
    if value is None:
        return False
    arguments = words[1:]
    if op == OR:
        # Alternatives sit at every other position: "<or> a <or> b" -> a, b.
        return value in arguments[::2]
    if not arguments:
        return False
    if op == ALL_IN:
        return all(word in value for word in arguments)
    return _CHECKS[op](value, arguments[0])


def check_requirement(requirement: str) -> None:
    """Raise :class:`InvalidRequirement` when ``requirement`` can never pass on any host: an
    operator without argument, a numeric operator with an argument that is not a number."""
    op = operator_of(requirement)
    if op is None:
        return
    arguments = requirement.split()[1:]
    if not arguments:
        raise InvalidRequirement(requirement, f'{op} needs an argument')
    if op in NUMERIC_OPERATORS:
        try:
            _number(arguments[0])
        except ValueError:
            raise InvalidRequirement(requirement, f'{op} compares numbers: '
                                     f'{arguments[0]!r} is not one') from None
