"""The config drive of an instance: what the daemon asks Ironic to build on the node.

Owns the content, as pure functions of the instance row (no I/O, no state: safe from any
thread). Ironic (API 1.56 and later) takes ``configdrive`` as a JSON object on the provision
call to ``active`` and builds the ISO (label ``config-2``) itself; cloud-init in the deployed
image reads it, so the server gets its key and user data without a metadata service.

* ``meta_data``: what Nova's metadata (``openstack/latest/meta_data.json``) holds for an
  Ironic instance: ``uuid``, ``name``, ``hostname`` (Nova's sanitising of the name, else
  ``server-<uuid>``), ``availability_zone``, ``launch_index`` (0), ``project_id``, ``meta`` (the
  server's metadata), and with a key pair ``public_keys`` (``{name: key}``) and ``keys``
  (``[{name, type, data}]``).
* ``user_data``: the server's user data, decoded from base64. Ironic writes a string as
  UTF-8, so user data must be UTF-8 text (:func:`decode_user_data`; the API refuses other
  bytes: Nova, which builds the ISO itself, also takes binary, e.g. gzip).
* ``network_data`` is left out: servers here have no networks (an Ironic whose network
  interface knows the node's ports writes its own).

Instances recorded before the config drive (``config_drive`` NULL) are deployed without one.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from computed.db.instances import InstanceRow

#: The one availability zone (computed.api.servers.ZONE).
ZONE = 'nova'
#: Longest hostname (dnsmasq's, as Nova).
HOSTNAME_LENGTH = 63


class InvalidUserData(ValueError):
    """User data that is not base64 of UTF-8 text."""


def decode_user_data(text: str) -> str:
    """The text ``text`` (base64, line breaks allowed) encodes; :class:`InvalidUserData`
    saying why when it is not base64 or not UTF-8 once decoded."""
    try:
        data = base64.b64decode(re.sub(r'[\r\n]', '', text), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidUserData('not base64') from None
    try:
        return data.decode('utf-8')
    except UnicodeDecodeError:
        raise InvalidUserData('not UTF-8 text once decoded (computed passes user data to '
                              'Ironic, which writes it as text)') from None


def hostname(name: str | None, uuid: str) -> str:
    """Nova's hostname of a server's name: latin-1 only, spaces, ``_`` and ``.`` as ``-``,
    other characters dropped, lower case, at most 63 characters, no leading or trailing
    ``-``/``.``; ``server-<uuid>`` when nothing is left."""
    text = (name or '').encode('latin-1', 'ignore').decode('latin-1')[:HOSTNAME_LENGTH]
    text = re.sub(r'[ _.]', '-', text)
    text = re.sub(r'[^\w.-]+', '', text).lower().strip('.-')
    return text or f'server-{uuid}'[:HOSTNAME_LENGTH]


def build(row: InstanceRow) -> dict[str, Any] | None:
    """Ironic's ``configdrive`` object for the instance, or None when it has none."""
    if not row.config_drive:
        return None
    meta_data: dict[str, Any] = {
        'uuid': row.uuid, 'name': row.name or '', 'hostname': hostname(row.name, row.uuid),
        'availability_zone': ZONE, 'launch_index': 0, 'project_id': row.project_id,
        'meta': dict(row.metadata)}
    if row.key_name and row.key_data:
        meta_data['public_keys'] = {row.key_name: row.key_data}
        meta_data['keys'] = [{'name': row.key_name, 'type': row.key_type or 'ssh',
                              'data': row.key_data}]
    drive: dict[str, Any] = {'meta_data': meta_data}
    if row.user_data:
        drive['user_data'] = decode_user_data(row.user_data)
    return drive
