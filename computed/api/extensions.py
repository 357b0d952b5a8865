"""``/extensions``: the v2.1 API's extension documents, a fixed list as Nova's.

Owns the list and its two views (``GET /extensions``, ``GET /extensions/{alias}``). Nova froze
its extensions when microversions replaced them (2.1): every Nova answers the same list of 99
aliases whatever it serves (it still lists ``os-consoles``, ``os-cells``, ``os-fping``, whose
APIs are gone), and clients use it only to find an alias they know. computed answers the same
aliases and names, so such a lookup finds what it finds in Nova; the list is not a statement of
what computed serves (docs/api.md is), and each description says so. Anyone authenticated may
read it (Nova's ``os_compute_api:extensions``); an unknown alias is a 404.
"""

from __future__ import annotations

from typing import Any

import webob

from computed.api import errors, policy
from computed.api.request import Call, json_response

EXTENSIONS = 'compute:extensions'

#: Nova's v2.1 extensions, ``alias name`` per line, in Nova's order (by alias).
_CATALOGUE = """
NMN Multinic
OS-DCF DiskConfig
OS-EXT-AZ ExtendedAvailabilityZone
OS-EXT-IMG-SIZE ImageSize
OS-EXT-IPS ExtendedIps
OS-EXT-IPS-MAC ExtendedIpsMac
OS-EXT-SRV-ATTR ExtendedServerAttributes
OS-EXT-STS ExtendedStatus
OS-FLV-DISABLED FlavorDisabled
OS-FLV-EXT-DATA FlavorExtraData
OS-SCH-HNT SchedulerHints
OS-SRV-USG ServerUsage
os-access-ips AccessIPs
os-admin-actions AdminActions
os-admin-password AdminPassword
os-agents Agents
os-aggregates Aggregates
os-assisted-volume-snapshots AssistedVolumeSnapshots
os-attach-interfaces AttachInterfaces
os-availability-zone AvailabilityZone
os-baremetal-ext-status BareMetalExtStatus
os-baremetal-nodes BareMetalNodes
os-block-device-mapping BlockDeviceMapping
os-block-device-mapping-v2-boot BlockDeviceMappingV2Boot
os-cell-capacities CellCapacities
os-cells Cells
os-certificates Certificates
os-cloudpipe Cloudpipe
os-cloudpipe-update CloudpipeUpdate
os-config-drive ConfigDrive
os-console-auth-tokens ConsoleAuthTokens
os-console-output ConsoleOutput
os-consoles Consoles
os-create-backup CreateBackup
os-create-server-ext Createserverext
os-deferred-delete DeferredDelete
os-evacuate Evacuate
os-extended-evacuate-find-host ExtendedEvacuateFindHost
os-extended-floating-ips ExtendedFloatingIps
os-extended-hypervisors ExtendedHypervisors
os-extended-networks ExtendedNetworks
os-extended-quotas ExtendedQuotas
os-extended-rescue-with-image ExtendedRescueWithImage
os-extended-services ExtendedServices
os-extended-services-delete ExtendedServicesDelete
os-extended-status ExtendedStatus
os-extended-volumes ExtendedVolumes
os-fixed-ips FixedIPs
os-flavor-access FlavorAccess
os-flavor-extra-specs FlavorExtraSpecs
os-flavor-manage FlavorManage
os-flavor-rxtx FlavorRxtx
os-flavor-swap FlavorSwap
os-floating-ip-dns FloatingIpDns
os-floating-ip-pools FloatingIpPools
os-floating-ips FloatingIps
os-floating-ips-bulk FloatingIpsBulk
os-fping Fping
os-hide-server-addresses HideServerAddresses
os-hosts Hosts
os-hypervisor-status HypervisorStatus
os-hypervisors Hypervisors
os-instance-actions InstanceActions
os-instance_usage_audit_log OSInstanceUsageAuditLog
os-keypairs Keypairs
os-lock-server LockServer
os-migrate-server MigrateServer
os-migrations Migrations
os-multiple-create MultipleCreate
os-networks Networks
os-networks-associate NetworkAssociationSupport
os-pause-server PauseServer
os-personality Personality
os-preserve-ephemeral-rebuild PreserveEphemeralOnRebuild
os-quota-class-sets QuotaClasses
os-quota-sets Quotas
os-rescue Rescue
os-security-group-default-rules SecurityGroupDefaultRules
os-security-groups SecurityGroups
os-server-diagnostics ServerDiagnostics
os-server-external-events ServerExternalEvents
os-server-group-quotas ServerGroupQuotas
os-server-groups ServerGroups
os-server-list-multi-status ServerListMultiStatus
os-server-password ServerPassword
os-server-sort-keys ServerSortKeys
os-server-start-stop ServerStartStop
os-services Services
os-shelve Shelve
os-simple-tenant-usage SimpleTenantUsage
os-suspend-server SuspendServer
os-tenant-networks OSTenantNetworks
os-used-limits UsedLimits
os-used-limits-for-admin UsedLimitsForAdmin
os-user-data UserData
os-user-quotas UserQuotas
os-virtual-interfaces VirtualInterfaces
os-volume-attachment-update VolumeAttachmentUpdate
os-volumes Volumes
"""

#: The fields every extension document has alike (as Nova's: its namespace was never served).
_UPDATED = '2014-12-03T00:00:00Z'
_NAMESPACE = 'http://docs.openstack.org/compute/ext/fake_xml'


def _document(alias: str, name: str) -> dict[str, Any]:
    return {'alias': alias, 'name': name, 'links': [], 'namespace': _NAMESPACE,
            'updated': _UPDATED,
            'description': f"Nova's {name} extension, in the fixed list of v2.1: listed for "
                           "compatibility, not a statement of what computed serves"}


#: alias -> its document, in the list's order.
CATALOGUE: dict[str, dict[str, Any]] = {
    alias: _document(alias, name)
    for alias, name in (line.split() for line in _CATALOGUE.strip().splitlines())}


def index(call: Call) -> webob.Response:
    policy.authorize(call.backends.enforcer, EXTENSIONS, call.context)
    return json_response(200, {'extensions': list(CATALOGUE.values())})


def show(call: Call) -> webob.Response:
    policy.authorize(call.backends.enforcer, EXTENSIONS, call.context)
    alias = call.params['alias']
    if alias not in CATALOGUE:
        raise errors.NotFound(f'Extension {alias} could not be found.')
    return json_response(200, {'extension': CATALOGUE[alias]})
