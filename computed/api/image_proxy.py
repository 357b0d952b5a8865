"""``/images``: Nova's deprecated image proxy to Glance (microversions 2.1 to 2.35; an image's
``metadata`` to 2.38), over the Image service :mod:`computed.api.glance` finds.

Owns the proxy's documents and what it asks Glance. As Nova's proxy:

* ``GET /images[/detail]`` lists the images Glance lists to the caller, with Nova's filters
  turned into Glance's (:func:`glance_query`: ``name``, ``status``, ``changes-since``,
  ``server``, ``type``, ``minRam``, ``minDisk``, ``property-*``), ``limit``/``marker`` paging
  (capped at ``[api] max_limit``; a next link when a page is full);
* ``GET /images/{id}`` is Nova's view of Glance's image (:func:`view`): status and progress
  from Glance's status, ``minRam``/``minDisk``, ``OS-EXT-IMG-SIZE:size``, ``metadata`` (the
  image's own properties: everything that is not one of Glance's attributes), ``server`` when
  the image names an ``instance_uuid``, links to the proxy and to Glance (``alternate``);
* ``DELETE /images/{id}`` deletes it in Glance (204);
* ``/images/{id}/metadata[/{key}]`` reads and writes the image's properties in Glance (a JSON
  patch): ``POST`` merges, ``PUT`` replaces them all, ``PUT /{key}`` sets one, ``DELETE /{key}``
  removes one; more than the project's ``metadata_items`` quota is a 403 as Nova's; a key that
  is one of Glance's attributes (``name``, ``min_ram``...) is a 400 (not metadata: Nova would
  have changed the attribute).

Who may see and change an image is Glance's decision where computed-api reads Glance with the
caller's token (keystone mode: Glance's 403 is the answer's). With the service's own access
(noauth2 and ``[glance] auth_type``) computed decides as Glance's default policy does: an image
is shown to the projects :func:`computed.api.images.visible` says (a listing drops the others),
and changed or deleted by its owner or an admin (403 otherwise). Ids that are not uuids are a
404 without asking Glance. No Image service: an empty listing, and every image a 404 saying so.
Glance down is a 503 naming it; Glance's refusals keep its status (400, 403, 409; 413 is the
403 of a quota) with its words.

Pure parts: :func:`glance_query`, :func:`view`, :func:`metadata_of`, :func:`changes`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import webob

from computed.api import errors, glance, images, policy, quotas, schemas
from computed.api.request import Call, empty, json_response

#: Glance's own attributes of an image (its schema's base properties): not metadata.
ATTRIBUTES = frozenset({
    'id', 'name', 'status', 'visibility', 'protected', 'os_hidden', 'checksum',
    'os_hash_algo', 'os_hash_value', 'owner', 'size', 'virtual_size', 'container_format',
    'disk_format', 'created_at', 'updated_at', 'tags', 'direct_url', 'min_ram', 'min_disk',
    'self', 'file', 'stores', 'schema', 'locations', 'deleted', 'deleted_at'})
#: Properties Nova keeps as JSON in Glance and shows decoded.
JSON_PROPERTIES = ('block_device_mapping', 'mappings')
STATUS = {'active': 'ACTIVE', 'queued': 'SAVING', 'saving': 'SAVING', 'deleted': 'DELETED',
          'pending_delete': 'DELETED', 'killed': 'ERROR'}
PROGRESS = {'queued': 25, 'saving': 50, 'active': 100}
#: Nova's filters and Glance's names of them.
FILTERS = {'name': 'name', 'status': 'status', 'server': 'instance_uuid',
           'type': 'image_type', 'minRam': 'min_ram', 'minDisk': 'min_disk'}
TRUE = frozenset({'1', 't', 'true', 'on', 'y', 'yes'})


# -- pure --------------------------------------------------------------------------------------

def glance_query(params: Iterator[tuple[str, str]] | list[tuple[str, str]]) -> dict[str, str]:
    """Glance's list filters for Nova's query parameters (others are ignored, as Nova's)."""
    query: dict[str, str] = {}
    for name, value in params:
        if name in FILTERS:
            if name == 'server':  # a server's uuid or its link
                value = value.rsplit('/', 1)[-1]
            elif name == 'status':
                value = value.lower()
            query[FILTERS[name]] = value
        elif name == 'changes-since':
            query['updated_at'] = f'gte:{value}'
        elif name.startswith('property-') and len(name) > len('property-'):
            query[name[len('property-'):]] = value
    return query


def metadata_of(image: dict[str, Any]) -> dict[str, Any]:
    """An image's metadata: its properties that are not Glance's attributes."""
    metadata = {key: value for key, value in image.items() if key not in ATTRIBUTES}
    for key in JSON_PROPERTIES:
        if isinstance(metadata.get(key), str):
            try:
                metadata[key] = json.loads(metadata[key])
            except ValueError:
                pass
    return metadata


def links(image_id: str, base_url: str, root_url: str, glance_url: str) -> list[dict[str, str]]:
    return [{'rel': 'self', 'href': f'{base_url}/images/{image_id}'},
            {'rel': 'bookmark', 'href': f'{root_url}/images/{image_id}'},
            {'rel': 'alternate', 'type': 'application/vnd.openstack.image',
             'href': f'{glance_url}/images/{image_id}'}]


def view(image: dict[str, Any], base_url: str, root_url: str, glance_url: str,
         detail: bool = True) -> dict[str, Any]:
    """Nova's document of Glance's ``image``: ``{id, name, links}``, and with ``detail`` the
    rest. ``base_url`` is the API's (``.../v2.1``), ``root_url`` its root (bookmarks)."""
    image_id = image['id']
    doc: dict[str, Any] = {'id': image_id, 'name': image.get('name'),
                           'links': links(image_id, base_url, root_url, glance_url)}
    if not detail:
        return doc
    metadata = metadata_of(image)
    status = image.get('status')
    doc.update({
        'minRam': int(image.get('min_ram') or 0), 'minDisk': int(image.get('min_disk') or 0),
        'metadata': metadata, 'created': image.get('created_at'),
        'updated': image.get('updated_at'), 'status': STATUS.get(status, 'UNKNOWN'),
        'progress': PROGRESS.get(status, 0), 'OS-EXT-IMG-SIZE:size': image.get('size') or 0})
    server = metadata.get('instance_uuid')
    if server is not None:
        doc['server'] = {'id': server, 'links': [
            {'rel': 'self', 'href': f'{base_url}/servers/{server}'},
            {'rel': 'bookmark', 'href': f'{root_url}/servers/{server}'}]}
    auto = metadata.get('auto_disk_config')
    if auto is not None:
        doc['OS-DCF:diskConfig'] = 'AUTO' if str(auto).strip().lower() in TRUE else 'MANUAL'
    return doc


def _pointer(key: str) -> str:
    return '/' + key.replace('~', '~0').replace('/', '~1')


def changes(current: dict[str, Any], wanted: dict[str, str]) -> list[dict[str, Any]]:
    """Glance's JSON patch from metadata ``current`` to ``wanted``: the items set, then the
    ones removed."""
    ops: list[dict[str, Any]] = [{'op': 'add', 'path': _pointer(key), 'value': value}
                                 for key, value in wanted.items() if current.get(key) != value]
    ops += [{'op': 'remove', 'path': _pointer(key)} for key in current if key not in wanted]
    return ops


# -- I/O ---------------------------------------------------------------------------------------

@contextmanager
def _glance_errors(image_id: str | None = None) -> Iterator[None]:
    try:
        yield
    except glance.GlanceUnavailable as exc:
        raise errors.ServiceUnavailable(f'Glance: {exc}') from None
    except glance.GlanceRefused as exc:
        if exc.status == 400:
            raise errors.BadRequest(f'Glance: {exc}') from None
        if exc.status == 409:
            raise errors.Conflict(f'Glance: {exc}') from None
        raise errors.Forbidden(f'Glance: {exc}') from None  # 403, and 413 (its quotas)
    except glance.NoImageService as exc:
        raise errors.NotFound(f'Image {image_id} not found: {exc}.') from None


def _allowed(call: Call, last: tuple[int, int]) -> None:
    if call.at_least(last[0], last[1] + 1):
        raise errors.NotFound(f'No resource at {call.request.path_info} after '
                              f'{last[0]}.{last[1]} (Nova removed its image proxy: use '
                              'the Image service)')


def _service_access(call: Call) -> bool:
    """Whether Glance is read with the service's own access (computed decides who sees)."""
    return not getattr(call.backends.glance, 'user_tokens', True)


def _admin(call: Call) -> bool:
    return policy.is_admin(call.backends.enforcer, call.context)


def _image(call: Call, image_id: str) -> dict[str, Any]:
    """Glance's image ``image_id`` as the caller may see it; 404 otherwise."""
    not_found = errors.NotFound(f'Image {image_id} not found.')
    backend = call.backends.glance
    if images.glance_id(image_id) is None:
        raise not_found
    if backend is None:
        raise errors.NotFound(f'Image {image_id} not found: no Image service is configured.')
    environ = call.request.environ
    with _glance_errors(image_id):
        found = backend.image(environ, image_id)
        if found is not None and _service_access(call) and not images.visible(
                found, call.context.project_id, _admin(call),
                lambda: backend.is_member(environ, image_id, call.context.project_id)):
            found = None
    if found is None:
        raise not_found
    return found


def _writable(call: Call, image: dict[str, Any], what: str) -> None:
    """With the service's access, only the image's owner or an admin changes it (Glance's
    default policy); with the caller's token Glance decides."""
    if _service_access(call) and not _admin(call) and \
            image.get('owner') != call.context.project_id:
        raise errors.Forbidden(f'You are not allowed to {what} image {image["id"]}.')


def _urls(call: Call) -> tuple[str, str, str]:
    with _glance_errors():
        glance_url = call.backends.glance.endpoint(call.request.environ)
    return call.base_url, call.request.application_url, glance_url


def _list(call: Call, detail: bool) -> webob.Response:
    _allowed(call, (2, 35))
    backend = call.backends.glance
    if backend is None or not getattr(backend, 'enabled', True):
        return json_response(200, {'images': []})
    limit = call.limit()
    environ = call.request.environ
    query = glance_query(list(call.request.GET.items()))
    marker = call.query('marker')
    judged, admin = _service_access(call), _admin(call)
    found: list[dict[str, Any]] = []
    while len(found) < limit:
        wanted = limit - len(found)
        with _glance_errors():
            try:
                batch = backend.images(environ, query, wanted, marker)
            except glance.NoImageService:
                return json_response(200, {'images': []})
        # With the service's access Glance lists every image: the caller's are kept, and
        # the next ones asked for until the page is full or Glance has no more.
        found += [image for image in batch if not judged
                  or images.visible(image, call.context.project_id, admin)]
        if len(batch) < wanted:
            break
        marker = batch[-1]['id']
    base_url, root_url, glance_url = _urls(call)
    body: dict[str, Any] = {'images': [view(image, base_url, root_url, glance_url, detail)
                                       for image in found]}
    if found and len(found) == limit:
        body['images_links'] = call.next_links('/images/detail' if detail else '/images',
                                               found[-1]['id'])
    return json_response(200, body)


def index(call: Call) -> webob.Response:
    return _list(call, detail=False)


def detail(call: Call) -> webob.Response:
    return _list(call, detail=True)


def show(call: Call) -> webob.Response:
    _allowed(call, (2, 35))
    image = _image(call, call.params['image_id'])
    return json_response(200, {'image': view(image, *_urls(call))})


def delete(call: Call) -> webob.Response:
    _allowed(call, (2, 35))
    image_id = call.params['image_id']
    image = _image(call, image_id)
    _writable(call, image, 'delete')
    with _glance_errors(image_id):
        deleted = call.backends.glance.delete(call.request.environ, image['id'])
    if not deleted:
        raise errors.NotFound(f'Image {image_id} not found.')
    return empty(204)


# -- /images/{id}/metadata ---------------------------------------------------------------------

def _set_metadata(call: Call, image: dict[str, Any], wanted: dict[str, str]) -> dict[str, Any]:
    """Make ``wanted`` the image's metadata in Glance (within the project's quota); the
    metadata as Glance then has it."""
    for key in wanted:
        if key in ATTRIBUTES:
            raise errors.BadRequest(f'{key} is an attribute of the image, not its metadata: '
                                    'change it in the Image service')
    quotas.check_metadata_items(call.backends, call.context.project_id, len(wanted))
    _writable(call, image, 'update')
    ops = changes(metadata_of(image), wanted)
    if not ops:
        return metadata_of(image)
    with _glance_errors(image['id']):
        updated = call.backends.glance.update(call.request.environ, image['id'], ops)
    if updated is None:
        raise errors.NotFound(f'Image {image["id"]} not found.')
    return metadata_of(updated)


def _metadata_image(call: Call) -> dict[str, Any]:
    _allowed(call, (2, 38))
    return _image(call, call.params['image_id'])


def metadata_index(call: Call) -> webob.Response:
    return json_response(200, {'metadata': metadata_of(_metadata_image(call))})


def metadata_show(call: Call) -> webob.Response:
    key = call.params['key']
    metadata = metadata_of(_metadata_image(call))
    if key not in metadata:
        raise errors.NotFound(f'Metadata item {key} was not found on image '
                              f'{call.params["image_id"]}.')
    return json_response(200, {'meta': {key: metadata[key]}})


def metadata_merge(call: Call) -> webob.Response:
    """``POST``: the items given are added or replace theirs; the others stay."""
    _allowed(call, (2, 38))
    given = call.body(schemas.SERVER_METADATA)['metadata']
    image = _metadata_image(call)
    current = {key: value for key, value in metadata_of(image).items()}
    return json_response(200, {'metadata': _set_metadata(call, image, {**current, **given})})


def metadata_replace(call: Call) -> webob.Response:
    """``PUT``: the items given are the image's metadata, the others removed."""
    _allowed(call, (2, 38))
    given = call.body(schemas.SERVER_METADATA)['metadata']
    image = _metadata_image(call)
    _set_metadata(call, image, dict(given))
    return json_response(200, {'metadata': given})


def metadata_set(call: Call) -> webob.Response:
    """``PUT /{key}`` with ``{"meta": {key: value}}`` (the key of the URL: 400 otherwise)."""
    _allowed(call, (2, 38))
    (key, value), = call.body(schemas.SERVER_METADATA_ITEM)['meta'].items()
    if key != call.params['key']:
        raise errors.BadRequest('Request body and URI mismatch')
    image = _metadata_image(call)
    _set_metadata(call, image, {**metadata_of(image), key: value})
    return json_response(200, {'meta': {key: value}})


def metadata_delete(call: Call) -> webob.Response:
    key = call.params['key']
    image = _metadata_image(call)
    metadata = metadata_of(image)
    if key not in metadata:
        raise errors.NotFound(f'Metadata item {key} was not found on image {image["id"]}.')
    _set_metadata(call, image, {k: v for k, v in metadata.items() if k != key})
    return empty(204)
