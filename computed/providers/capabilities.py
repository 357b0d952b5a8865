"""Ironic node capabilities as Placement traits, and back.

Owns the one name mapping between a node's ``properties['capabilities']`` (Ironic's
``"k1:v1,k2:v2"`` string, what Nova's ComputeCapabilitiesFilter matched flavors against) and
the custom traits the daemons report for it, so that a flavor's ``capabilities:<key>=<value>``
extra spec is decided by Placement as a required trait instead of by a post-filter. Pure: no
I/O, no logging.

The mapping (documented in docs/api.md; reversible, so a trait read back from Placement names
the capability it stands for):

* a *plain* pair, key and value made of lower-case letters and digits in words joined by single
  underscores (``boot_mode:uefi``, ``secure_boot:true``, ``disk_label:gpt``), becomes
  ``CUSTOM_CAP_<KEY>__<VALUE>`` upper-cased: ``CUSTOM_CAP_BOOT_MODE__UEFI``. The double
  underscore separates key from value, which a plain word never contains.
* any other pair (capitals, dashes, dots, spaces...) becomes ``CUSTOM_CAPX_<base32 of
  "key:value">`` without padding (RFC 4648's alphabet is upper-case letters and 2-7, all valid
  in a trait name): unreadable, but exact.

Guarantees: :func:`capability_trait` and :func:`parse_capability_trait` are inverse for every
pair whose trait fits Placement's 255-character limit; a pair that does not fit, an empty key or
a malformed capabilities string raises :class:`InvalidCapability` naming the pair.
"""

from __future__ import annotations

import base64
import binascii
import re

PLAIN_PREFIX = 'CUSTOM_CAP_'
ENCODED_PREFIX = 'CUSTOM_CAPX_'
_SEPARATOR = '__'
_MAX_TRAIT = 255
_PLAIN_WORDS = re.compile(r'[a-z0-9]+(?:_[a-z0-9]+)*')


class InvalidCapability(ValueError):
    """A capability (or capabilities string, or trait) that cannot be mapped."""


def capability_trait(key: str, value: str) -> str:
    """The trait standing for capability ``key:value``."""
    if not key:
        raise InvalidCapability(f'capability {key}:{value}: empty key')
    if _PLAIN_WORDS.fullmatch(key) and _PLAIN_WORDS.fullmatch(value):
        trait = f'{PLAIN_PREFIX}{key.upper()}{_SEPARATOR}{value.upper()}'
    else:
        encoded = base64.b32encode(f'{key}:{value}'.encode()).decode('ascii').rstrip('=')
        trait = ENCODED_PREFIX + encoded
    if len(trait) > _MAX_TRAIT:
        raise InvalidCapability(f'capability {key}:{value}: too long for a trait '
                                f'({len(trait)} > {_MAX_TRAIT} characters)')
    return trait


def parse_capability_trait(trait: str) -> tuple[str, str] | None:
    """The ``(key, value)`` a trait stands for; None when it is not a capability trait."""
    if trait.startswith(ENCODED_PREFIX):
        encoded = trait[len(ENCODED_PREFIX):]
        try:
            text = base64.b32decode(encoded + '=' * (-len(encoded) % 8)).decode()
        except (binascii.Error, UnicodeDecodeError):
            return None
        key, sep, value = text.partition(':')
        return (key, value) if sep and key else None
    if trait.startswith(PLAIN_PREFIX):
        key, sep, value = trait[len(PLAIN_PREFIX):].partition(_SEPARATOR)
        if not sep:
            return None
        key, value = key.lower(), value.lower()
        if _PLAIN_WORDS.fullmatch(key) and _PLAIN_WORDS.fullmatch(value):
            return key, value
    return None


def parse_capabilities(text: str | None) -> dict[str, str]:
    """Ironic's ``"k1:v1,k2:v2"`` as a dict (None or blank: no capabilities).

    Whitespace around keys and values is dropped, as Nova's filter and Ironic's own parsing
    do; a repeated key keeps its last value, as theirs do.
    """
    capabilities: dict[str, str] = {}
    if text is None or not text.strip():
        return capabilities
    for item in text.split(','):
        if not item.strip():
            continue
        key, sep, value = item.partition(':')
        key, value = key.strip(), value.strip()
        if not sep or not key:
            raise InvalidCapability(f'capability {item.strip()!r}: not "key:value"')
        capabilities[key] = value
    return capabilities


def capability_traits(text: str | None) -> tuple[str, ...]:
    """The traits for every capability of a node's capabilities string, sorted."""
    return tuple(sorted(capability_trait(key, value)
                        for key, value in parse_capabilities(text).items()))
