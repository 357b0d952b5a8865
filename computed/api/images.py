"""Which Glance image a server may be built from, and how it is shown: the pure decisions.

Owns the reading of an ``imageRef`` (:func:`glance_id`: a uuid names a Glance image, anything
else is an image URL for :mod:`computed.api.image_urls`), the judgment of the image Glance
returned (:func:`judge`: it exists, is ``active`` and is visible to the caller's project,
with Nova's 400 messages), whether it fits the flavor (:func:`check_fit`: its ``min_ram``,
``min_disk`` and size within the flavor's memory and disk, with Nova's messages) and the
image of a server document (:func:`shown`: Nova's ``{id, links}`` with a bookmark to
``/images/{id}`` for a Glance image, the URL itself for an image URL). The instance records
the Glance id as its image, which the daemon hands to Ironic as ``instance_info.image_source``:
Ironic fetches the image from Glance itself.

Pure: no I/O (the Glance calls are :mod:`computed.api.glance`'s).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from computed.api import image_urls

#: Glance's visibilities that every project sees.
PUBLIC = frozenset({'public', 'community'})


class BadImage(ValueError):
    """Not an image a server may be built from; the message is Nova's."""


def glance_id(ref: str) -> str | None:
    """The Glance image id ``ref`` names (a uuid, hyphenated or not, as Nova's
    ``is_uuid_like``), in its canonical form; None for anything else (an image URL)."""
    try:
        value = uuid.UUID(ref)
    except (ValueError, TypeError, AttributeError):
        return None
    # uuid.UUID also takes '{...}' and 'urn:uuid:' forms, which Nova does not.
    return str(value) if ref.replace('-', '').lower() == value.hex else None


def judge(image_id: str, image: dict[str, Any] | None, project_id: str, admin: bool,
          member: Callable[[], bool] = lambda: False) -> None:
    """Raise :class:`BadImage` unless ``image`` (Glance's document, None if Glance did not
    find it) may be built from by ``project_id``. Glance already hides what a user's token may
    not see; this also decides for an image read with the service's own access (noauth2):
    public and community images are everyone's, private and shared ones their owner's,
    shared ones also their members' (``member()`` asks Glance, only when it matters), and an
    admin sees every image as Glance's admin does."""
    if image is None or not visible(image, project_id, admin, member):
        raise BadImage(f'Image {image_id} could not be found.')
    if image.get('status') != 'active':
        raise BadImage(f'Image {image_id} is not active.')


#: Bytes in a GB of a flavor's disk (and of an image's ``min_disk``), as Nova counts them.
GIB = 1024 ** 3


def check_fit(image: dict[str, Any], ram: int, disk: int) -> None:
    """Raise :class:`BadImage` unless a flavor of ``ram`` MB and ``disk`` GB can hold
    ``image`` (Glance's document), as Nova's API checks before a build or a rebuild: the
    image's ``min_ram`` at most the flavor's memory; its size (bytes) and ``min_disk`` (GB)
    at most the flavor's disk, unless that is 0 (Nova's "0 means do not check"). Glance's
    null for any of them (an image without data) requires nothing."""
    if ram < int(image.get('min_ram') or 0):
        raise BadImage("Flavor's memory is too small for requested image.")
    flavor_bytes = disk * GIB
    if flavor_bytes == 0:
        return
    size = int(image.get('size') or 0)
    if size > flavor_bytes:
        raise BadImage(f"Flavor's disk is too small for requested image. Flavor disk is "
                       f'{flavor_bytes} bytes, image is {size} bytes.')
    min_disk = int(image.get('min_disk') or 0) * GIB
    if min_disk > flavor_bytes:
        raise BadImage("Flavor's disk is smaller than the minimum size specified in image "
                       f'metadata. Flavor disk is {flavor_bytes} bytes, minimum size is '
                       f'{min_disk} bytes.')


def visible(image: dict[str, Any], project_id: str, admin: bool,
            member: Callable[[], bool] = lambda: False) -> bool:
    """Whether ``project_id`` sees ``image`` (Glance's document): public and community images
    are everyone's, private and shared ones their owner's, shared ones also their members'
    (``member()`` asks Glance, only when it matters); an admin sees every image."""
    return (admin or image.get('visibility') in PUBLIC
            or (image.get('owner') is not None and image.get('owner') == project_id)
            or (image.get('visibility') == 'shared' and member()))


def shown(image: str | None, application_url: str) -> dict[str, Any] | str:
    """The ``image`` of a server document: Nova's ``{id, links}``, its bookmark
    ``{application_url}/images/{id}`` for a Glance image and the URL (without credentials)
    for an image URL; ``''`` for a server without an image (Nova's volume-backed form)."""
    if not image:
        return ''
    if glance_id(image):
        return {'id': image,
                'links': [{'rel': 'bookmark', 'href': f'{application_url}/images/{image}'}]}
    url = image_urls.shown(image)
    return {'id': url, 'links': [{'rel': 'bookmark', 'href': url}]}
