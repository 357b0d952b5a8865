"""JSON schemas of the request bodies the compute API accepts, and their validation.

Owns the shape of every body: what is required, the types, the bounds, and that nothing
unknown is accepted silently (``additionalProperties: false`` wherever Nova refuses extras).
A body that does not match is a 400 whose message names the property at fault.
"""

from __future__ import annotations

from typing import Any

import jsonschema

from computed.api import errors, limits

NAME = {'type': 'string', 'minLength': 1, 'maxLength': 255,
        'pattern': r'^(?![\s])[^\x00-\x1f]*(?<![\s])$'}
#: Sizes: an integer or a string of one, within the database's INTEGER (limits.MAX_INT).
NON_NEGATIVE = {'type': ['integer', 'string'], 'pattern': '^[0-9]{1,10}$', 'minimum': 0,
                'maximum': limits.MAX_INT}
#: A server's metadata. How many items: the project's ``metadata_items`` quota, a 403 as Nova's
#: (computed.api.server_edits), not a bound of the schema's.
METADATA = {'type': 'object',
            'patternProperties': {'^[a-zA-Z0-9-_:. /]{1,255}$': {
                'type': 'string', 'maxLength': 255}},
            'additionalProperties': False}
#: A tag as Nova's (2.26): 1 to 60 characters, no ',' nor '/' (computed.api.server_edits).
TAG = {'type': 'string', 'minLength': 1, 'maxLength': 60, 'pattern': r'^[^,/\x00-\x1f\x7f]*$'}
EXTRA_SPECS = {'type': 'object', 'minProperties': 1,
               'patternProperties': {'^[a-zA-Z0-9-_:. /]{1,255}$': {
                   'type': ['string', 'integer', 'number', 'boolean'], 'maxLength': 255}},
               'additionalProperties': False}

FLAVOR_CREATE = {
    'type': 'object',
    'properties': {'flavor': {
        'type': 'object',
        'properties': {
            'name': NAME,
            # Nova takes a number too (Tempest sends integers): it is the id's string.
            'id': {'type': ['string', 'integer', 'null'], 'minLength': 1, 'maxLength': 255,
                   'minimum': 0, 'maximum': limits.MAX_INT,
                   'pattern': r'^(?! )[a-zA-Z0-9. _-]+(?<! )$'},
            'ram': NON_NEGATIVE, 'vcpus': NON_NEGATIVE, 'disk': NON_NEGATIVE,
            'OS-FLV-EXT-DATA:ephemeral': NON_NEGATIVE,
            'swap': {'type': ['integer', 'string'], 'pattern': '^[0-9]{0,10}$', 'minimum': 0,
                     'maximum': limits.MAX_INT},
            'rxtx_factor': {'type': ['number', 'string'], 'minimum': 0, 'exclusiveMinimum': True,
                            'maximum': 3.4e38, 'pattern': r'^[0-9]{1,10}(\.[0-9]{1,10})?$'},
            'os-flavor-access:is_public': {'type': ['boolean', 'string']},
            'description': {'type': ['string', 'null'], 'maxLength': 65535},
        },
        'required': ['name', 'ram', 'vcpus', 'disk'],
        'additionalProperties': False,
    }},
    'required': ['flavor'],
    'additionalProperties': False,
}

#: PUT /flavors/{id} (2.55): the description only, as Nova.
FLAVOR_UPDATE = {
    'type': 'object',
    'properties': {'flavor': {
        'type': 'object',
        'properties': {'description': {'type': ['string', 'null'], 'maxLength': 65535}},
        'required': ['description'],
        'additionalProperties': False,
    }},
    'required': ['flavor'],
    'additionalProperties': False,
}

EXTRA_SPECS_CREATE = {
    'type': 'object',
    'properties': {'extra_specs': EXTRA_SPECS},
    'required': ['extra_specs'],
    'additionalProperties': False,
}

EXTRA_SPEC_UPDATE = dict(EXTRA_SPECS, minProperties=1, maxProperties=1)

#: Longest image URL (and flavor reference) a server may be created with.
IMAGE_URL_LENGTH = 2048
#: No control character (NUL cannot even be stored in PostgreSQL).
PRINTABLE = r'^[^\x00-\x1f\x7f]*$'

#: No control character but line breaks (base64 wrapped in lines).
PRINTABLE_LINES = r'^[^\x00-\x09\x0b\x0c\x0e-\x1f\x7f]*$'

#: A boolean as Nova's parameter_types.boolean takes one.
BOOLEAN = {'type': ['boolean', 'string'],
           'enum': [True, 'True', 'TRUE', 'true', '1', 'ON', 'On', 'on', 'YES', 'Yes', 'yes',
                    False, 'False', 'FALSE', 'false', '0', 'OFF', 'Off', 'off', 'NO', 'No',
                    'no']}

#: ``os:scheduler_hints`` as Nova's schema takes them: any hint (operators' filters read their
#: own), the ones Nova's filters read in their form; handed to the filters as they are.
SCHEDULER_HINTS = {
    'type': 'object',
    'properties': {
        'query': {'type': ['string', 'object', 'array']},
        'group': {'type': 'string'},
        'different_host': {'type': ['string', 'array'], 'items': {'type': 'string'}},
        'same_host': {'type': ['string', 'array'], 'items': {'type': 'string'}},
    },
    'additionalProperties': True,
}

_SHORT_TEXT = {'type': 'string', 'maxLength': 255}
#: One item of ``block_device_mapping_v2``: the fields Nova's schema takes, with its types and
#: enumerations; what bare metal makes of them is computed.api.block_devices'.
BLOCK_DEVICE_MAPPING_V2 = {
    'type': 'object',
    'properties': {
        'source_type': {'type': 'string', 'enum': ['volume', 'image', 'snapshot', 'blank']},
        'destination_type': {'type': 'string', 'enum': ['local', 'volume']},
        'uuid': {'type': 'string', 'minLength': 1, 'maxLength': 255,
                 'pattern': '^[a-zA-Z0-9._-]*$'},
        'image_id': {'type': 'string', 'minLength': 1, 'maxLength': 255,
                     'pattern': '^[a-zA-Z0-9._-]*$'},
        'volume_id': {'type': 'string', 'minLength': 1, 'maxLength': 255},
        'snapshot_id': {'type': 'string', 'minLength': 1, 'maxLength': 255},
        'boot_index': {'type': ['integer', 'string', 'null'], 'pattern': '^-?[0-9]+$'},
        'volume_size': {'type': ['integer', 'string'], 'pattern': '^[0-9]{1,10}$',
                        'minimum': 1, 'maximum': limits.MAX_INT},
        'device_name': {'type': 'string', 'minLength': 1, 'maxLength': 255,
                        'pattern': '^[a-zA-Z0-9._/-]*$'},
        'delete_on_termination': BOOLEAN,
        'virtual_name': _SHORT_TEXT, 'guest_format': _SHORT_TEXT,
        'device_type': _SHORT_TEXT, 'disk_bus': _SHORT_TEXT,
        'no_device': {},
        'connection_info': {'type': 'string', 'maxLength': 16777215},
    },
    'additionalProperties': False,
}

SERVER_CREATE = {
    'type': 'object',
    'properties': {'os:scheduler_hints': SCHEDULER_HINTS,
                   'OS-SCH-HNT:scheduler_hints': SCHEDULER_HINTS,
                   'server': {
        'type': 'object',
        'properties': {
            'name': NAME,
            'flavorRef': {'type': ['string', 'integer'], 'minLength': 1,
                          'maxLength': IMAGE_URL_LENGTH, 'pattern': PRINTABLE},
            'imageRef': {'type': 'string', 'minLength': 1, 'maxLength': IMAGE_URL_LENGTH,
                         'pattern': PRINTABLE},
            'networks': {'oneOf': [
                {'type': 'string', 'enum': ['none', 'auto']},
                {'type': 'array', 'maxItems': 0},
            ]},
            'metadata': METADATA,
            'description': {'type': ['string', 'null'], 'maxLength': 255,
                            'pattern': PRINTABLE},
            # Checked against their bounds by the controller (computed.api.servers).
            'min_count': {'type': ['integer', 'string'], 'pattern': '^[0-9]{1,10}$'},
            'max_count': {'type': ['integer', 'string'], 'pattern': '^[0-9]{1,10}$'},
            'return_reservation_id': BOOLEAN,
            'availability_zone': NAME,
            # A key pair of the caller's (checked by the controller, 400 otherwise); null
            # too, as computed took it before key pairs.
            'key_name': {'anyOf': [NAME, {'type': 'null'}]},
            # Nova's bound: 65,535 characters of base64 (decoded by the controller).
            'user_data': {'type': 'string', 'maxLength': 65535, 'pattern': PRINTABLE_LINES},
            'config_drive': BOOLEAN,
            # Accepted as Nova accepts them; what bare metal makes of each: docs/api.md.
            'adminPass': {'type': 'string', 'maxLength': 255, 'pattern': r'^[^\x00]*$'},
            'accessIPv4': {'type': 'string', 'maxLength': 15},
            'accessIPv6': {'type': 'string', 'maxLength': 45},
            'OS-DCF:diskConfig': {'type': 'string', 'enum': ['AUTO', 'MANUAL']},
            # From 2.52 (computed.api.servers): the tags of each server made.
            'tags': {'type': 'array', 'items': TAG, 'maxItems': 50},
            # What the CLI sends with --image; only that is taken (computed.api.block_devices).
            'block_device_mapping_v2': {'type': 'array', 'items': BLOCK_DEVICE_MAPPING_V2},
        },
        'required': ['name', 'flavorRef', 'imageRef'],
        'additionalProperties': False,
    }},
    'required': ['server'],
    'additionalProperties': False,
}

#: A key pair's name as Nova's schema takes it (before 2.92): letters, digits, ``_``, ``-``
#: and inner spaces.
KEYPAIR_NAME = {'type': 'string', 'minLength': 1, 'maxLength': 255,
                'pattern': r'^(?! )[_\- a-zA-Z0-9]+(?<! )$'}
#: ``POST /os-keypairs`` at 2.1; 2.2 adds ``type``, 2.10 an admin's ``user_id``.
KEYPAIR_CREATE = {
    'type': 'object',
    'properties': {'keypair': {
        'type': 'object',
        'properties': {'name': KEYPAIR_NAME,
                       'public_key': {'type': 'string', 'maxLength': 65535}},
        'required': ['name'],
        'additionalProperties': False,
    }},
    'required': ['keypair'],
    'additionalProperties': False,
}
KEYPAIR_CREATE_2_2 = {**KEYPAIR_CREATE, 'properties': {'keypair': {
    **KEYPAIR_CREATE['properties']['keypair'],
    'properties': {**KEYPAIR_CREATE['properties']['keypair']['properties'],
                   'type': {'type': 'string', 'enum': ['ssh', 'x509']}}}}}
KEYPAIR_CREATE_2_10 = {**KEYPAIR_CREATE, 'properties': {'keypair': {
    **KEYPAIR_CREATE_2_2['properties']['keypair'],
    'properties': {**KEYPAIR_CREATE_2_2['properties']['keypair']['properties'],
                   'user_id': {'type': 'string', 'minLength': 1, 'maxLength': 255,
                               'pattern': PRINTABLE}}}}}

REBOOT = {
    'type': 'object',
    'properties': {'reboot': {
        'type': 'object',
        'properties': {'type': {'type': 'string', 'enum': ['SOFT', 'HARD', 'soft', 'hard']}},
        'required': ['type'],
        'additionalProperties': False,
    }},
    'required': ['reboot'],
    'additionalProperties': False,
}
#: os-stop and os-start take nothing: null, or an empty object (what Nova's clients send).
NOTHING = {'oneOf': [{'type': 'null'},
                     {'type': 'object', 'maxProperties': 0}]}
OS_STOP = {'type': 'object', 'properties': {'os-stop': NOTHING},
           'required': ['os-stop'], 'additionalProperties': False}
OS_START = {'type': 'object', 'properties': {'os-start': NOTHING},
            'required': ['os-start'], 'additionalProperties': False}


def _action(name: str, value: dict[str, Any]) -> dict[str, Any]:
    """The body of action ``name`` whose value is ``value``."""
    return {'type': 'object', 'properties': {name: value}, 'required': [name],
            'additionalProperties': False}


FORCE_DELETE = _action('forceDelete', NOTHING)
#: A security group's name, as Nova's (a Neutron name: at most 255 characters).
_GROUP = {'type': 'object', 'properties': {'name': {
    'type': 'string', 'minLength': 1, 'maxLength': 255, 'pattern': PRINTABLE}},
    'required': ['name'], 'additionalProperties': False}
ADD_SECURITY_GROUP = _action('addSecurityGroup', _GROUP)
REMOVE_SECURITY_GROUP = _action('removeSecurityGroup', _GROUP)
LOCK = _action('lock', NOTHING)
UNLOCK = _action('unlock', NOTHING)
#: A private flavor's access actions (POST /flavors/{id}/action): a project id, as Nova's.
TENANT_ACCESS = {name: _action(name, {
    'type': 'object', 'properties': {'tenant': {
        'type': 'string', 'minLength': 1, 'maxLength': 255, 'pattern': PRINTABLE}},
    'required': ['tenant'], 'additionalProperties': False})
    for name in ('addTenantAccess', 'removeTenantAccess')}

#: PUT /servers/{id}, as Nova's (description from 2.19: computed.api.server_edits).
SERVER_UPDATE = {
    'type': 'object',
    'properties': {'server': {
        'type': 'object',
        'properties': {
            'name': NAME,
            'description': {'type': ['string', 'null'], 'maxLength': 255,
                            'pattern': PRINTABLE},
            'accessIPv4': {'type': 'string', 'maxLength': 15},
            'accessIPv6': {'type': 'string', 'maxLength': 45},
            'OS-DCF:diskConfig': {'type': 'string', 'enum': ['AUTO', 'MANUAL']},
        },
        'additionalProperties': False,
    }},
    'required': ['server'],
    'additionalProperties': False,
}
#: POST and PUT /servers/{id}/metadata.
SERVER_METADATA = {'type': 'object', 'properties': {'metadata': METADATA},
                   'required': ['metadata'], 'additionalProperties': False}
#: PUT /servers/{id}/metadata/{key}: exactly one item.
SERVER_METADATA_ITEM = {'type': 'object',
                        'properties': {'meta': dict(METADATA, minProperties=1,
                                                    maxProperties=1)},
                        'required': ['meta'], 'additionalProperties': False}
#: PUT /servers/{id}/tags: the whole list, at most 50.
SERVER_TAGS = {'type': 'object',
               'properties': {'tags': {'type': 'array', 'items': TAG, 'maxItems': 50}},
               'required': ['tags'], 'additionalProperties': False}
#: PUT /servers/{id}/tags/{tag}: no body, or null.
SERVER_TAG = {'type': 'null'}
#: The os-resetState action (admins): the two states Nova takes.
RESET_STATE = {
    'type': 'object',
    'properties': {'os-resetState': {
        'type': 'object',
        'properties': {'state': {'type': 'string', 'enum': ['active', 'error']}},
        'required': ['state'],
        'additionalProperties': False,
    }},
    'required': ['os-resetState'],
    'additionalProperties': False,
}

QUOTA_LIMIT = {'type': ['integer', 'string'], 'pattern': '^-?[0-9]{1,10}$', 'minimum': -1,
               'maximum': limits.MAX_INT}
QUOTA_UPDATE = {
    'type': 'object',
    'properties': {'quota_set': {
        'type': 'object',
        # Every key Nova's quota sets have (which of them a microversion takes, and which are
        # enforced: computed.api.quotas).
        'properties': dict({key: QUOTA_LIMIT for key in (
            'instances', 'cores', 'ram', 'metadata_items', 'key_pairs', 'server_groups',
            'server_group_members', 'injected_files', 'injected_file_content_bytes',
            'injected_file_path_bytes', 'fixed_ips', 'floating_ips', 'security_groups',
            'security_group_rules', 'networks')}, force={'type': ['boolean', 'string']}),
        # Placement's class names: 255 characters at most.
        'patternProperties': {'^CUSTOM_[A-Z0-9_]{1,248}$': QUOTA_LIMIT},
        'additionalProperties': False,
    }},
    'required': ['quota_set'],
    'additionalProperties': False,
}

#: PUT /os-quota-class-sets/{class}: Nova's quota keys (which ones a microversion takes:
#: computed.api.quota_classes).
QUOTA_CLASS_UPDATE = {
    'type': 'object',
    'properties': {'quota_class_set': {
        'type': 'object',
        'properties': {key: QUOTA_LIMIT for key in (
            'instances', 'cores', 'ram', 'metadata_items', 'key_pairs', 'server_groups',
            'server_group_members', 'injected_files', 'injected_file_content_bytes',
            'injected_file_path_bytes', 'fixed_ips', 'floating_ips', 'security_groups',
            'security_group_rules')},
        'additionalProperties': False,
    }},
    'required': ['quota_class_set'],
    'additionalProperties': False,
}

SERVICE_UPDATE = {
    'type': 'object',
    'properties': {
        'status': {'type': 'string', 'enum': ['enabled', 'disabled']},
        'disabled_reason': {'type': ['string', 'null'], 'minLength': 1, 'maxLength': 255},
        'forced_down': {'type': 'boolean', 'enum': [False]},
    },
    'required': ['status'],
    'additionalProperties': False,
}

SERVICE_UPDATE_LEGACY = {
    'type': 'object',
    'properties': {
        'host': {'type': 'string', 'minLength': 1, 'maxLength': 255},
        'binary': {'type': 'string', 'minLength': 1, 'maxLength': 255},
        'disabled_reason': {'type': 'string', 'minLength': 1, 'maxLength': 255},
    },
    'required': ['host', 'binary'],
    'additionalProperties': False,
}

_ENABLE = {'type': 'string', 'enum': ['enable', 'disable', 'Enable', 'Disable', 'ENABLE',
                                      'DISABLE']}

#: ``PUT /os-hosts/{host}``, Nova's: one of them at least.
HOST_UPDATE = {
    'type': 'object',
    'properties': {'status': _ENABLE, 'maintenance_mode': _ENABLE},
    'anyOf': [{'required': ['status']}, {'required': ['maintenance_mode']}],
    'additionalProperties': False,
}


#: Longest string value an error message quotes.
QUOTED = 64


def validate(schema: dict[str, Any], document: Any) -> None:
    """400 naming the first property that does not match ``schema``."""
    validator = jsonschema.Draft4Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(document))
    if error is None:
        return
    where = '/'.join(str(part) for part in error.absolute_path)
    message = error.message
    if isinstance(error.instance, str) and len(error.instance) > QUOTED:
        # A long value is not echoed whole (an image URL of 2 kB, what it may carry).
        message = message.replace(repr(error.instance),
                                  f'The value ({len(error.instance)} characters)')
    raise errors.BadRequest('Invalid input for field/attribute '
                            f'{where or "(body)"}. {message}')
