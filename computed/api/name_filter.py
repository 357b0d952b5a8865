"""The ``name`` filter of ``GET /servers``: a regular expression, as Nova's, at a bounded cost.

Owns compiling a client's pattern and matching server names against it. Nova hands the
pattern to its database (``~`` on PostgreSQL, ``REGEXP`` on MySQL): a search anywhere in the
name, case-sensitive. Python's :mod:`re` backtracks, so a pattern such as ``(a+)+$`` takes
exponential time on a name of a few dozen characters: a client could hold an API worker for
ever with one request. So the pattern is parsed with Python's own parser (the syntax clients
know), then run as an automaton without backtracking (a Thompson NFA, turned into a DFA
lazily and cached per pattern): each character of a name costs at most one step per
instruction of the program, whatever the pattern.

Guarantees: :func:`compile_filter` refuses (:class:`InvalidFilter`, a 400 for the API) a
pattern longer than :data:`MAX_PATTERN`, one Python cannot parse, one using what an automaton
cannot run (backreferences, lookaround, atomic groups and possessive repeats, ``\\b``,
scoped flags) and one whose program would exceed :data:`MAX_PROGRAM` instructions (large
counted repeats). :meth:`Filter.matches` charges the work it does to the filter's
:attr:`Filter.spent`, so that a caller can stop a scan at a budget (see
:mod:`computed.api.servers`). Pure.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

try:  # Python 3.11+
    from re import _constants as sre  # type: ignore[attr-defined]
    from re import _parser as sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as sre  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]

#: Longest pattern accepted: a server name's own limit.
MAX_PATTERN = 255
#: Most instructions a pattern may compile to (``a{1000}`` is a thousand).
MAX_PROGRAM = 512
#: DFA transitions kept per filter before the cache starts again.
MAX_CACHE = 10_000

Predicate = Callable[[str], bool]

CHAR, SPLIT, JMP, BOL, EOL, MATCH = range(6)


class InvalidFilter(ValueError):
    """The pattern cannot be used as a name filter; the message says why."""


@dataclasses.dataclass
class _Compiler:
    ignore_case: bool
    program: list[tuple[Any, ...]] = dataclasses.field(default_factory=list)

    def emit(self, *instruction: Any) -> int:
        if len(self.program) >= MAX_PROGRAM:
            raise InvalidFilter(f'the pattern is too complex (more than {MAX_PROGRAM} '
                                'instructions once counted repeats are expanded)')
        self.program.append(instruction)
        return len(self.program) - 1

    def patch(self, at: int, *instruction: Any) -> None:
        self.program[at] = instruction

    def char(self, predicate: Predicate) -> None:
        if self.ignore_case:
            plain = predicate
            predicate = lambda ch: plain(ch) or plain(ch.lower()) or plain(ch.upper())  # noqa: E731
        self.emit(CHAR, predicate)

    def sequence(self, items: Any) -> None:
        for op, av in items:
            self.item(op, av)

    def item(self, op: Any, av: Any) -> None:
        if op is sre.LITERAL:
            self.char(_equal(chr(av)))
        elif op is sre.NOT_LITERAL:
            self.char(_not_equal(chr(av)))
        elif op is sre.ANY:
            self.char(lambda ch: ch != '\n')
        elif op is sre.IN:
            self.char(_in(av))
        elif op is sre.SUBPATTERN:
            _group, add_flags, del_flags, items = av
            if add_flags or del_flags:
                raise InvalidFilter('flags that apply to a group only are not supported')
            self.sequence(items)
        elif op is sre.BRANCH:
            self.branch(av[1])
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
            # Lazy or greedy, a repeat matches the same names: only whether one matches counts.
            low, high, items = av
            self.repeat(low, high, items)
        elif op is sre.AT:
            if av in (sre.AT_BEGINNING, sre.AT_BEGINNING_STRING):
                self.emit(BOL)
            elif av in (sre.AT_END, sre.AT_END_STRING):
                self.emit(EOL)
            else:
                raise InvalidFilter(f'{_name(av)} is not supported')
        else:
            raise InvalidFilter(f'{_name(op)} (backreferences, lookaround, atomic groups, '
                                'possessive repeats) is not supported')

    def branch(self, alternatives: list[Any]) -> None:
        jumps = []
        for alternative in alternatives[:-1]:
            split = self.emit(SPLIT, 0, 0)
            self.sequence(alternative)
            jumps.append(self.emit(JMP, 0))
            self.patch(split, SPLIT, split + 1, len(self.program))
        self.sequence(alternatives[-1])
        for jump in jumps:
            self.patch(jump, JMP, len(self.program))

    def repeat(self, low: int, high: int, items: Any) -> None:
        for _ in range(low):
            self.sequence(items)
        if high == sre.MAXREPEAT:
            split = self.emit(SPLIT, 0, 0)
            self.sequence(items)
            self.emit(JMP, split)
            self.patch(split, SPLIT, split + 1, len(self.program))
            return
        splits = []
        for _ in range(high - low):
            splits.append(self.emit(SPLIT, 0, 0))
            self.sequence(items)
        for split in splits:
            self.patch(split, SPLIT, split + 1, len(self.program))


def _equal(c: str) -> Predicate:
    return lambda ch: ch == c


def _not_equal(c: str) -> Predicate:
    return lambda ch: ch != c


def _between(low: str, high: str) -> Predicate:
    return lambda ch: low <= ch <= high


def _name(op: Any) -> str:
    return str(op).lower().replace('_', ' ')


def _category(category: Any) -> Predicate:
    tests: dict[Any, Predicate] = {
        sre.CATEGORY_DIGIT: str.isdecimal,
        sre.CATEGORY_NOT_DIGIT: lambda ch: not ch.isdecimal(),
        sre.CATEGORY_SPACE: str.isspace,
        sre.CATEGORY_NOT_SPACE: lambda ch: not ch.isspace(),
        sre.CATEGORY_WORD: lambda ch: ch.isalnum() or ch == '_',
        sre.CATEGORY_NOT_WORD: lambda ch: not (ch.isalnum() or ch == '_'),
    }
    if category not in tests:
        raise InvalidFilter(f'{_name(category)} is not supported')
    return tests[category]


def _in(items: list[Any]) -> Predicate:
    """A character class ``[...]`` as a predicate."""
    negate = False
    tests: list[Predicate] = []
    for op, av in items:
        if op is sre.NEGATE:
            negate = True
        elif op is sre.LITERAL:
            tests.append(_equal(chr(av)))
        elif op is sre.RANGE:
            tests.append(_between(chr(av[0]), chr(av[1])))
        elif op is sre.CATEGORY:
            tests.append(_category(av))
        else:
            raise InvalidFilter(f'{_name(op)} in a character class is not supported')
    return lambda ch: any(test(ch) for test in tests) != negate


@dataclasses.dataclass
class Filter:
    """A compiled name filter. :attr:`spent` counts the automaton steps done so far."""

    pattern: str
    program: list[tuple[Any, ...]]
    spent: int = 0
    _cache: dict[tuple[frozenset[int], str], frozenset[int]] = dataclasses.field(
        default_factory=dict)

    def _closure(self, pcs: set[int], at_start: bool, at_end: bool) -> frozenset[int]:
        """The instructions reachable from ``pcs`` without reading a character: the ones
        that read one, MATCH, and EOL assertions not yet at the end (pending)."""
        seen: set[int] = set()
        stack = list(pcs)
        result = set()
        while stack:
            pc = stack.pop()
            if pc in seen:
                continue
            seen.add(pc)
            self.spent += 1
            op = self.program[pc]
            if op[0] == SPLIT:
                stack.extend((op[1], op[2]))
            elif op[0] == JMP:
                stack.append(op[1])
            elif op[0] == BOL:
                if at_start:
                    stack.append(pc + 1)
            elif op[0] == EOL and at_end:
                stack.append(pc + 1)
            else:
                result.add(pc)
        return frozenset(result)

    def _step(self, state: frozenset[int], ch: str) -> frozenset[int]:
        key = (state, ch)
        cached = self._cache.get(key)
        if cached is not None:
            self.spent += 1
            return cached
        following = {0}  # a search: a match may start at the next character too
        for pc in state:
            self.spent += 1
            op = self.program[pc]
            if op[0] == CHAR and op[1](ch):
                following.add(pc + 1)
        result = self._closure(following, at_start=False, at_end=False)
        if len(self._cache) >= MAX_CACHE:
            self._cache.clear()
        self._cache[key] = result
        return result

    def _done(self, state: frozenset[int], at_start: bool) -> bool:
        matching = len(self.program) - 1
        if matching in state:
            return True
        pending = {pc + 1 for pc in state if self.program[pc][0] == EOL}
        return bool(pending) and matching in self._closure(pending, at_start, at_end=True)

    def matches(self, name: str | None) -> bool:
        """Whether the pattern is found anywhere in ``name`` (None: the empty name)."""
        name = name or ''
        matching = len(self.program) - 1
        state = self._closure({0}, at_start=True, at_end=False)
        if matching in state:
            return True
        for ch in name:
            state = self._step(state, ch)
            if matching in state:
                return True
        return self._done(state, at_start=not name)


def compile_filter(pattern: str) -> Filter:
    """The filter of ``pattern``; :class:`InvalidFilter` saying why it cannot be one."""
    if len(pattern) > MAX_PATTERN:
        raise InvalidFilter(f'the pattern is longer than {MAX_PATTERN} characters')
    try:
        parsed = sre_parse.parse(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        raise InvalidFilter(f'not a regular expression: {exc}') from None
    flags = parsed.state.flags
    if flags & ~(re.UNICODE | re.IGNORECASE | re.DOTALL | re.MULTILINE):
        raise InvalidFilter('only the flags i, s and m are supported')
    compiler = _Compiler(ignore_case=bool(flags & re.IGNORECASE))
    try:
        compiler.sequence(parsed)
    except RecursionError:
        raise InvalidFilter('the pattern nests too deeply') from None
    compiler.emit(MATCH)
    return Filter(pattern, compiler.program)


def is_literal(pattern: str) -> bool:
    """Whether ``pattern`` has no special character: a plain substring search, which the
    database can do over every row without the automaton."""
    return not any(ch in SPECIAL for ch in pattern)


#: The characters that make a pattern more than a substring.
SPECIAL = frozenset('.^$*+?{}[]\\|()')
