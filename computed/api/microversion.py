"""Compute API microversions: which one a request asks for, and which ones exist.

Owns the supported range (:data:`MIN_VERSION`..:data:`MAX_VERSION`) and the parsing of the two
request headers clients send: ``OpenStack-API-Version: compute X.Y`` (preferred) and the older
``X-OpenStack-Nova-API-Version: X.Y``. No header: the minimum, 2.1. ``latest``: the maximum.
A malformed version is a 400, a well-formed one outside the range a 406 naming the range.
Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from computed.api import errors

SERVICE = 'compute'
HEADER = 'OpenStack-API-Version'
LEGACY_HEADER = 'X-OpenStack-Nova-API-Version'
_VERSION = re.compile(r'([1-9][0-9]*)\.(0|[1-9][0-9]*)')


class Version(NamedTuple):
    major: int
    minor: int

    def __str__(self) -> str:
        return f'{self.major}.{self.minor}'


MIN_VERSION = Version(2, 1)
#: 2.61: flavors carry their extra specs; docs/api.md lists what each version changes here.
MAX_VERSION = Version(2, 61)


def parse(text: str) -> Version:
    """``'2.53'`` as a Version; 400 when malformed."""
    text = text.strip()
    if text.lower() == 'latest':
        return MAX_VERSION
    match = _VERSION.fullmatch(text)
    if not match:
        raise errors.BadRequest(f'API version string {text!r} is not valid: use X.Y, e.g. '
                                f'{MAX_VERSION}')
    return Version(int(match.group(1)), int(match.group(2)))


def requested(headers: dict[str, str] | object) -> Version:
    """The version a request asks for (headers: a case-insensitive mapping); 400 or 406."""
    value = None
    header = headers.get(HEADER)  # type: ignore[attr-defined]
    if header:
        # "compute 2.53", possibly among other services': "compute 2.53, placement 1.9".
        for item in header.split(','):
            service, _sep, version = item.strip().partition(' ')
            if service.lower() == SERVICE:
                value = version
    if value is None:
        value = headers.get(LEGACY_HEADER)  # type: ignore[attr-defined]
    if not value:
        return MIN_VERSION
    version = parse(value)
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise errors.NotAcceptable(f'Version {version} is not supported by the API. Minimum '
                                   f'is {MIN_VERSION} and maximum is {MAX_VERSION}.')
    return version


def response_headers(version: Version) -> dict[str, str]:
    """What every versioned response carries, so clients see the version that served them."""
    return {HEADER: f'{SERVICE} {version}', LEGACY_HEADER: str(version),
            'Vary': f'{HEADER}, {LEGACY_HEADER}'}
