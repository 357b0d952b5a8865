"""``block_device_mapping_v2`` of ``POST /servers``: what bare metal takes of Nova's block
device mappings.

Owns the decision, as a pure function (no I/O): a server here is the image written to its
node's own disk by Ironic, with no Block Storage service, so the one mapping accepted is the
one that says exactly that, which the stock ``openstack server create --image`` sends with
every build (python-openstackclient 6.x on): the image ``imageRef`` names, ``source_type``
``image``, ``destination_type`` ``local`` (or left out), ``boot_index`` 0. It changes nothing:
the server is built from ``imageRef``, as Nova's Ironic driver builds from the image and
ignores local image mappings. ``device_name``, ``delete_on_termination``, ``disk_bus``,
``device_type``, ``guest_format``, ``volume_size`` of that mapping are accepted and ignored,
as they are for a bare-metal node in Nova.

Anything else (a volume, snapshot or blank disk, a second mapping, another boot index, a
different image than ``imageRef``) is :class:`BadMapping`, a one-line reason the API answers
as a 400 before anything is read or written. The shape (types, Nova's enumerations) is the
schema's (:data:`computed.api.schemas.BLOCK_DEVICE_MAPPING_V2`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from computed.api import images

FIELD = 'block_device_mapping_v2'


class BadMapping(ValueError):
    """A mapping bare metal cannot honour (the message says which and why)."""


def check(mappings: Sequence[dict[str, Any]], image_ref: str) -> None:
    """Raise :class:`BadMapping` unless ``mappings`` is empty or the image mapping of
    ``image_ref`` (see the module's docstring)."""
    if not mappings:
        return
    if len(mappings) > 1:
        raise BadMapping(f'{FIELD}: {len(mappings)} mappings; a bare-metal server is its image '
                         'on the node\'s own disk: only the image mapping of imageRef is taken '
                         '(no volumes, swap nor ephemeral disks)')
    mapping = mappings[0]
    source = mapping.get('source_type')
    destination = mapping.get('destination_type', 'local')
    if source != 'image' or destination != 'local':
        raise BadMapping(f'{FIELD}: source_type {source!r}, destination_type {destination!r} '
                         'is not supported: there is no Block Storage service; a bare-metal '
                         'server is its image (source_type image, destination_type local)')
    if str(mapping.get('boot_index')) != '0':
        raise BadMapping(f'{FIELD}: the image mapping must have boot_index 0, not '
                         f'{mapping.get("boot_index")!r}')
    named = mapping.get('uuid') or mapping.get('image_id')
    image = None if named is None else images.glance_id(str(named))
    if image is None or image != images.glance_id(image_ref):
        raise BadMapping(f'{FIELD}: the image mapping names image {named!r}, imageRef '
                         f'{image_ref!r}: they must be the same Glance image')
