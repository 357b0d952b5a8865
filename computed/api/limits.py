"""The compute API's input limits, chosen on purpose, and the checks that apply them.

Owns what any request may carry (docs/api.md, "Input limits", repeats them): the body's size
and JSON nesting depth, the JSON it may contain (no ``NaN``/``Infinity``, no number out of
range), strings without NUL (PostgreSQL cannot store one, and no identifier of OpenStack has
one), identifiers of at most 255 characters (the database's columns), integers in the
database's range, query parameters in ASCII digits where they are numbers. Every refusal is an
:class:`~computed.api.errors.APIError` naming the field or parameter at fault; nothing here
does I/O.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from typing import Any

from computed.api import errors

#: Largest request body, in bytes (oslo.middleware's sizelimit default, which Nova runs).
MAX_BODY_BYTES = 112 * 1024
#: Deepest nesting of arrays and objects in a JSON body. Nova's deepest body nests 4 levels;
#: past this the parser and the schema validator would recurse without bound.
MAX_JSON_DEPTH = 32
#: Largest integer a size or a quota limit may be (the database's INTEGER, Nova's MAX_INT).
MAX_INT = 2**31 - 1
#: Longest identifier: flavor, server and project ids, names, keys (the database's columns).
MAX_ID_LENGTH = 255
#: Longest value of a query parameter (image URLs are the longest filter values).
MAX_QUERY_VALUE = 2048
#: Query parameters that are a direction of sorting, each value ``asc`` or ``desc``.
SORT_DIRECTIONS = ('asc', 'desc')

_DIGITS = re.compile(r'[0-9]{1,10}')
_INTEGER = re.compile(r'-?[0-9]{1,10}')


def no_nul(value: str, what: str) -> str:
    """``value``, or a 400 naming ``what`` when it holds a NUL character."""
    if '\x00' in value:
        raise errors.BadRequest(f'{what} must not contain a NUL character')
    return value


def identifier(value: str, what: str) -> str:
    """An id or name from a path, a token or a body: no NUL, at most 255 characters."""
    no_nul(value, what)
    if len(value) > MAX_ID_LENGTH:
        raise errors.BadRequest(f'{what} is {len(value)} characters long; the limit is '
                                f'{MAX_ID_LENGTH}')
    return value


def query_int(text: str, what: str, minimum: int = 0, maximum: int = MAX_INT) -> int:
    """A query parameter that is a number: ASCII digits only (``²`` and ``٣`` are digits to
    ``str.isdigit``, not to ``int``), within [minimum, maximum]; else a 400 naming it."""
    if not _DIGITS.fullmatch(text) or not minimum <= int(text) <= maximum:
        raise errors.BadRequest(f'{what} must be an integer from {minimum} to {maximum}, not '
                                f'{text!r}')
    return int(text)


def integer(value: Any, what: str, minimum: int, maximum: int = MAX_INT) -> int:
    """A body value that is an integer or a string of one (as Nova accepts them), within
    [minimum, maximum]; else a 400 naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise errors.BadRequest(f'{what} must be an integer, not {value!r}')
    if isinstance(value, str):
        if not _INTEGER.fullmatch(value.strip()):
            raise errors.BadRequest(f'{what} must be an integer from {minimum} to {maximum}, '
                                    f'not {value[:40]!r}')
        value = int(value)
    if not minimum <= value <= maximum:
        raise errors.BadRequest(f'{what} must be an integer from {minimum} to {maximum}, not '
                                f'{value}')
    return value


def query(items: Iterable[tuple[str, str]]) -> None:
    """Check every query parameter: no NUL, values of a bounded length, ``limit`` a number,
    ``sort_dir`` a direction (each check a 400 naming the parameter)."""
    for name, value in items:
        no_nul(name, 'a query parameter name')
        no_nul(value, f'query parameter {name}')
        if len(value) > MAX_QUERY_VALUE:
            raise errors.BadRequest(f'query parameter {name} is {len(value)} characters long; '
                                    f'the limit is {MAX_QUERY_VALUE}')
        if name == 'limit':
            query_int(value, 'limit')
        elif name == 'sort_dir' and value not in SORT_DIRECTIONS:
            raise errors.BadRequest(f'sort_dir must be asc or desc, not {value!r}')


def _depth(body: bytes) -> int:
    """How deep arrays and objects nest in ``body`` (brackets inside strings not counted);
    stops counting past :data:`MAX_JSON_DEPTH`."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in body:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_JSON_DEPTH:
                    return deepest
        elif byte in (0x5D, 0x7D):  # ] }
            depth -= 1
    return deepest


def _refuse_constant(name: str) -> Any:
    raise ValueError(f'{name} is not a number JSON allows')


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f'{text} is out of range')
    return number


def _no_nul_inside(document: Any, where: str) -> None:
    if isinstance(document, str):
        no_nul(document, where or 'the request body')
    elif isinstance(document, dict):
        for key, value in document.items():
            no_nul(key, f'a key of {where or "the request body"}')
            _no_nul_inside(value, f'{where}/{key}' if where else key)
    elif isinstance(document, list):
        for index, value in enumerate(document):
            _no_nul_inside(value, f'{where}/{index}')


def json_body(body: bytes) -> Any:
    """The JSON document of a request body, within the limits: 413 past
    :data:`MAX_BODY_BYTES`, 400 when malformed, nested deeper than :data:`MAX_JSON_DEPTH`,
    holding ``NaN``/``Infinity``/an out-of-range number, or a NUL in a key or a string."""
    if len(body) > MAX_BODY_BYTES:
        raise errors.RequestTooLarge(f'The request body is {len(body)} bytes; the limit is '
                                     f'{MAX_BODY_BYTES}')
    if not body:
        return None
    # Counting brackets costs a pass in Python: only when there are enough of them to matter.
    if body.count(b'[') + body.count(b'{') > MAX_JSON_DEPTH and _depth(body) > MAX_JSON_DEPTH:
        raise errors.BadRequest(f'Malformed request body: JSON nested deeper than '
                                f'{MAX_JSON_DEPTH} levels')
    try:
        document = json.loads(body, parse_constant=_refuse_constant, parse_float=_finite)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise errors.BadRequest(f'Malformed request body: {exc}') from None
    _no_nul_inside(document, '')
    return document
