"""Which image URLs a server may be built from, and how one is shown back.

Owns the decision on an ``imageRef`` that is not a Glance image id (those are
:mod:`computed.api.images`'s). A real Ironic conductor fetches the URL it is given (or
reads it, for ``file://``) from inside the deployment network, with the conductor's own
rights: an image URL is a request the API's caller makes the conductor send. So, by default:

* at most :data:`computed.api.schemas.IMAGE_URL_LENGTH` characters (the schema's limit);
* schemes ``http`` and ``https`` only (``[api] image_url_schemes``; ``file`` may be added by
  an operator whose conductors hold images locally: it reads any file the conductor can);
* a host is required, a well-formed DNS name or an IP literal; host names that the C
  resolver reads as addresses (``2852039166``, ``0xa9fea9fe``, ``0251.0376.0251.0376``) are
  refused, so the address checks cannot be bypassed by spelling;
* addresses that are never an image server's are refused: link-local (``169.254.0.0/16``
  with the clouds' metadata services, ``fe80::/10``), loopback (``127.0.0.0/8``, ``::1``,
  ``localhost``), unspecified, multicast, reserved, and IPv6 forms of such IPv4 addresses.
  ``[api] image_url_allowed_networks`` lets an operator allow some of them back (an image
  cache on each conductor's loopback). Private networks are allowed: image servers of a real
  cloud usually live there. Names are not resolved (a check at the API would not bind the
  conductor's own lookup later); keeping conductors from internal names is the network's job.
* credentials in a URL (``user:password@``) are refused, and never echoed in an error; an
  image URL stored before this check is shown without them (:func:`shown`).

Pure: no I/O.
"""

from __future__ import annotations

import ipaddress
import re
import urllib.parse
from collections.abc import Iterable

from computed.conf.api import IMAGE_URL_SCHEMES

#: Characters of an image URL quoted in an error message.
QUOTED = 100

_LABEL = re.compile(r'^(?!-)[a-z0-9-]{1,63}(?<!-)$')
#: A label the C resolver's inet_aton reads as a number (decimal, octal, hexadecimal).
_NUMERIC = re.compile(r'^(0x[0-9a-f]*|[0-9]+)$')
_REFUSED_NAMES = ('localhost', 'localhost.localdomain')

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class BadImageURL(ValueError):
    """Not an image URL a server may be built from; the message says why (without the URL's
    credentials)."""


def quoted(ref: str) -> str:
    """``ref`` as an error message may show it: without credentials, cut short."""
    text = shown(ref)
    return repr(text if len(text) <= QUOTED else text[:QUOTED] + '...')


def shown(ref: str) -> str:
    """``ref`` without the ``user:password@`` it may carry (URLs recorded before they were
    refused)."""
    try:
        parsed = urllib.parse.urlsplit(ref)
    except ValueError:
        return ref
    if '@' not in parsed.netloc:
        return ref
    return urllib.parse.urlunsplit(parsed._replace(netloc=parsed.netloc.rsplit('@', 1)[1]))


def networks(texts: Iterable[str]) -> list[Network]:
    """``[api] image_url_allowed_networks`` as networks; ValueError naming a bad one."""
    result = []
    for text in texts:
        try:
            result.append(ipaddress.ip_network(text.strip(), strict=False))
        except ValueError:
            raise ValueError(f'{text!r} is not a network (an address or CIDR)') from None
    return result


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address):
        if address.scope_id:
            raise BadImageURL('an IPv6 address with a zone is not an image server')
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
    return address


def _check_host(host: str, allowed: Iterable[Network]) -> None:
    address = _address(host)
    if address is None:
        labels = host.rstrip('.').split('.')
        if not all(_LABEL.match(label) for label in labels):
            raise BadImageURL('its host is not a valid host name')
        if all(_NUMERIC.match(label) for label in labels):
            raise BadImageURL('its host is an address in a form other than the standard one')
        if host.rstrip('.') in _REFUSED_NAMES or host.rstrip('.').endswith('.localhost'):
            address = ipaddress.ip_address('127.0.0.1')
        else:
            return
    if any(address in network for network in allowed):
        return
    for kind, refused in (('link-local', address.is_link_local),
                          ('loopback', address.is_loopback),
                          ('unspecified', address.is_unspecified),
                          ('multicast', address.is_multicast),
                          ('reserved', address.is_reserved)):
        if refused:
            raise BadImageURL(f'its host is a {kind} address, which image URLs may not name '
                              '(see [api] image_url_allowed_networks)')


def check(ref: str, schemes: Iterable[str] = IMAGE_URL_SCHEMES,
          allowed: Iterable[Network] = (), image_service: bool = False) -> str:
    """``ref`` if a server may be built from it; :class:`BadImageURL` saying why not
    (``image_service``: a Glance id would have been taken, :mod:`computed.api.images`)."""
    schemes = tuple(schemes)
    try:
        parsed = urllib.parse.urlsplit(ref)
        port = parsed.port  # ValueError for a port that is not one
    except ValueError:
        raise BadImageURL('it is not a well-formed URL') from None
    if parsed.scheme not in schemes:
        listed = ', '.join(f'{scheme}://' for scheme in schemes)
        if image_service:
            raise BadImageURL(f'it is neither a Glance image id nor an image URL ({listed})')
        raise BadImageURL(f'it is not an image URL ({listed}): computed has no Image service')
    if parsed.username is not None or parsed.password is not None or '@' in parsed.netloc:
        raise BadImageURL('credentials in an image URL are refused: they would be stored and '
                          'shown; give the image server\'s URL without them')
    if parsed.scheme == 'file':
        if parsed.netloc not in ('', 'localhost') or not parsed.path.startswith('/'):
            raise BadImageURL('a file URL is file:///absolute/path')
        return ref
    host = parsed.hostname
    if not host:
        raise BadImageURL(f'it has no host ({parsed.scheme}://HOST/PATH)')
    if port == 0:
        raise BadImageURL('its port is 0')
    _check_host(host, tuple(allowed))
    return ref
