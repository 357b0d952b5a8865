"""computed's own tables: ``providers`` (the reporter's ordering) and ``instances``.

Owns the schema as SQLAlchemy declarative models; the Alembic migrations in
``computed/db/migrations`` must produce exactly this schema (a unit test runs
autogenerate's compare and expects no difference).

``providers``: one row per resource provider (= Ironic node) that a reporter
has applied to Placement, with the (claim epoch, sequence) of the last
applied report. A report is applied only when its (claim_epoch, seq) is
strictly greater, lexicographically, than the stored pair (see
:func:`computed.db.providers.apply_reports_if_newer`), and Placement's generation of
the provider after computed's last write to it (what the resync compares with
Placement's listing, :mod:`computed.reporter.resync`).

``instances``: one row per instance, live or deleted, with the daemon managing
it as (host, member epoch), and what the compute API shows of it: the owning project and
user, its name, metadata and the flavor it was built from (a copy, so that deleting the flavor
changes no server).

``flavors`` and ``flavor_extra_specs``: the compute API's flavors; the extra specs are what
scheduling reads (:mod:`computed.instances.flavor_specs`); ``flavor_projects``: the projects
on a private flavor's access list. ``quota_limits``: a project's own limits (Nova's keys, or a
resource class), overriding the defaults; ``quota_classes``: a quota class's limits (the class
``default``'s are the defaults, overriding ``[quota]``'s). ``quota_projects``: one row per
project that ever built, only to be locked, so that the quota decisions of one project's
builds are taken one at a time; ``quota_reservations``: the builds admitted by quota whose
instance row does not exist yet (a build in flight between the decision and its row), counted
with the live rows (see :func:`computed.db.quotas.reserve_quota`).
``key_pairs``: each user's key pairs (``os-keypairs``), one name per user. ``aggregates``,
``aggregate_hosts`` and ``aggregate_metadata``: Nova's host aggregates (``os-aggregates``),
named groups of daemons with metadata, which nothing places by (computed.api.aggregates).

Two epochs, two names: a *claim epoch* is the creation zxid of a node's claim
znode (new for every claim; the fencing token of reports); a *member epoch* is
the zxid of a daemon's membership znode (new on every join; instances are
fenced by it).

At most one live instance per node, enforced by the database. The design must
work on PostgreSQL, sqlite and MySQL/MariaDB, and MySQL has no partial index,
so instead of ``UNIQUE (node_uuid) WHERE state != 'DELETED'`` the table has a
*stored generated column*::

    live_node_uuid = CASE WHEN state <> 'DELETED' THEN node_uuid END

with a plain ``UNIQUE`` constraint on it. The database computes the column on
every insert and update (the application never writes it), a deleted instance
has NULL there, and every backend lets any number of rows share NULL in a
unique column, so the constraint is exactly "one non-DELETED instance per
node" on all three (PostgreSQL >= 12, sqlite >= 3.31, MySQL >= 5.7,
MariaDB >= 10.2). Compared with a separate ``node_leases`` table this keeps
the rule in one row and one statement: there is no lease to forget to
release, and no second table to keep in step with ``state``.

States are the values of :class:`InstanceState`, stored as plain strings
(validated by :mod:`computed.db.instances`, not by a CHECK constraint, so adding a
state later needs no migration).
"""

from __future__ import annotations

import datetime
import enum

from sqlalchemy import (
    BigInteger,
    Boolean,
    Computed,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# Deterministic constraint names, so migrations can refer to them on every backend.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_N_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

UUID_LENGTH = 36
#: Nova's locked_by: ``owner`` or ``admin``.
LOCKED_BY_LENGTH = 16
HOST_LENGTH = 255
NAME_LENGTH = 255
STATE_LENGTH = 16
#: An IPv4 or IPv6 address in text (45: an IPv4-mapped IPv6 address).
IP_LENGTH = 45
#: A key pair's type: ``ssh`` or ``x509``.
KEY_TYPE_LENGTH = 16


class InstanceState(str, enum.Enum):
    """An instance's state; the value is what the database and the CLI show.

    Transitional ones (BUILDING, REBOOTING, STOPPING, STARTING, DELETING, REBUILDING,
    REBUILDING_OFF) are what a daemon sets before acting on Ironic; whoever owns the instance next
    finds it there and must resolve it, so none stays transitional after its daemon dies.
    A rebuild has two: REBUILDING ends ACTIVE, REBUILDING_OFF (asked of a STOPPED instance) ends
    STOPPED, as Nova leaves a rebuilt server in the power state it had; the state is all that
    survives a lost cast or a dead daemon, so it carries where the rebuild ends.
    """

    BUILDING = "BUILDING"
    ACTIVE = "ACTIVE"
    STOPPING = "STOPPING"
    STOPPED = "STOPPED"
    STARTING = "STARTING"
    REBOOTING = "REBOOTING"
    ERROR = "ERROR"
    DELETING = "DELETING"
    DELETED = "DELETED"
    REBUILDING = "REBUILDING"
    REBUILDING_OFF = "REBUILDING_OFF"

    def __str__(self) -> str:
        # The value in messages too, as enum.StrEnum (Python >= 3.11; computed runs on 3.10).
        return self.value


# The members by their short names, as the lifecycle reads them (``models.ACTIVE``): the same
# objects, not a second set of constants.
BUILDING = InstanceState.BUILDING
ACTIVE = InstanceState.ACTIVE
STOPPING = InstanceState.STOPPING
STOPPED = InstanceState.STOPPED
STARTING = InstanceState.STARTING
REBOOTING = InstanceState.REBOOTING
ERROR = InstanceState.ERROR
DELETING = InstanceState.DELETING
DELETED = InstanceState.DELETED
REBUILDING = InstanceState.REBUILDING
REBUILDING_OFF = InstanceState.REBUILDING_OFF

#: The project and user of instances made without the compute API (``computed-manage server``,
#: and every instance made before revision 0004).
BUILT_IN_PROJECT = "computed"
BUILT_IN_USER = "computed"

STATES = frozenset(InstanceState)
TRANSITIONAL_STATES = frozenset({BUILDING, STOPPING, STARTING, REBOOTING, DELETING, REBUILDING,
                                 REBUILDING_OFF})
LIVE_STATES = STATES - {DELETED}

# The expression behind instances.live_node_uuid; DELETED is a literal on purpose: it is
# part of the schema, and the migration repeats it.
LIVE_NODE_EXPRESSION = "CASE WHEN state <> 'DELETED' THEN node_uuid END"


def utcnow() -> datetime.datetime:
    """Naive UTC, as stored (MySQL's DATETIME has no time zone)."""
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Provider(Base):
    __tablename__ = "providers"

    uuid: Mapped[str] = mapped_column(String(UUID_LENGTH), primary_key=True)
    # (claim_epoch, seq) of the last applied report: the epoch of the sender's claim on the
    # node (the fencing token), and the report's sequence number within that claim.
    claim_epoch: Mapped[int] = mapped_column(BigInteger, nullable=False)
    seq: Mapped[int] = mapped_column(BigInteger, nullable=False)
    host: Mapped[str] = mapped_column(String(HOST_LENGTH), nullable=False)
    # JSON of the provider state last applied; NULL once deleted.
    state: Mapped[str | None] = mapped_column(Text, nullable=True)
    deleted: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    updated_at: Mapped[datetime.datetime] = mapped_column(DateTime, nullable=False,
                                                          default=utcnow)
    # Placement's generation of the provider after computed's last write to it; NULL when not
    # known (deleted, or last written before revision 0003). Another writer bumps it.
    placement_generation: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


class Instance(Base):
    __tablename__ = "instances"
    __table_args__ = (
        UniqueConstraint("live_node_uuid"),
        Index("ix_instances_host", "host"),
        Index("ix_instances_project_id", "project_id"),
        Index("ix_instances_reservation_id", "reservation_id"),
    )

    uuid: Mapped[str] = mapped_column(String(UUID_LENGTH), primary_key=True)
    # NULL until the instance is scheduled to a node.
    node_uuid: Mapped[str | None] = mapped_column(String(UUID_LENGTH), nullable=True)
    # Written by the database only (see the module docstring).
    live_node_uuid: Mapped[str | None] = mapped_column(
        String(UUID_LENGTH), Computed(LIVE_NODE_EXPRESSION, persisted=True), nullable=True)
    # The daemon that manages the instance, and its member epoch when it took the instance
    # (what the claim znode of the node recorded at scheduling, or the adopter's at re-homing):
    # every write is fenced by the pair, and re-homing is a compare-and-set on it.
    host: Mapped[str | None] = mapped_column(String(HOST_LENGTH), nullable=True)
    member_epoch: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    state: Mapped[str] = mapped_column(String(STATE_LENGTH), nullable=False)
    resource_class: Mapped[str] = mapped_column(String(255), nullable=False)
    traits: Mapped[str] = mapped_column(Text, nullable=False)  # JSON list of trait names
    image: Mapped[str | None] = mapped_column(Text, nullable=True)
    fault: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime.datetime] = mapped_column(DateTime, nullable=False,
                                                          default=utcnow)
    updated_at: Mapped[datetime.datetime] = mapped_column(DateTime, nullable=False,
                                                          default=utcnow)
    deleted_at: Mapped[datetime.datetime | None] = mapped_column(DateTime, nullable=True)
    # What the compute API shows (revision 0004). Rows made before it belong to the built-in
    # project and user "computed" (the migration fills them in); NULL is never written since.
    project_id: Mapped[str | None] = mapped_column(String(NAME_LENGTH), nullable=True)
    user_id: Mapped[str | None] = mapped_column(String(NAME_LENGTH), nullable=True)
    name: Mapped[str | None] = mapped_column(String(NAME_LENGTH), nullable=True)
    # JSON object of the server's metadata (Nova's "metadata"), NULL: none.
    user_metadata: Mapped[str | None] = mapped_column(Text, nullable=True)
    # JSON copy of the flavor the instance was built from (id, name, sizes, extra specs).
    flavor: Mapped[str | None] = mapped_column(Text, nullable=True)
    # What Nova's create takes and shows back (revision 0006); NULL: not given (rows before).
    description: Mapped[str | None] = mapped_column(String(NAME_LENGTH), nullable=True)
    access_ip_v4: Mapped[str | None] = mapped_column(String(IP_LENGTH), nullable=True)
    access_ip_v6: Mapped[str | None] = mapped_column(String(IP_LENGTH), nullable=True)
    # The "r-..." id of the request that created the instance with others (min/max_count).
    reservation_id: Mapped[str | None] = mapped_column(String(UUID_LENGTH), nullable=True)
    # Revision 0007: a copy of the key pair the instance was built with (deleting the key pair
    # changes no server, as in Nova), its user data (base64, as given) and whether the daemon
    # deploys it with a config drive; NULL: none (rows before).
    key_name: Mapped[str | None] = mapped_column(String(NAME_LENGTH), nullable=True)
    key_type: Mapped[str | None] = mapped_column(String(KEY_TYPE_LENGTH), nullable=True)
    key_data: Mapped[str | None] = mapped_column(Text, nullable=True)
    user_data: Mapped[str | None] = mapped_column(Text, nullable=True)
    config_drive: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    # Revision 0008: JSON list of the server's tags (Nova's 2.26), NULL: none.
    tags: Mapped[str | None] = mapped_column(Text, nullable=True)
    # Revision 0009: who locked the server (Nova's locked_by: "owner" or "admin"), NULL:
    # unlocked.
    locked_by: Mapped[str | None] = mapped_column(String(LOCKED_BY_LENGTH), nullable=True)
    # Revision 0009: JSON list of the security groups' names the server is in (a user's note:
    # it has no ports), NULL: ["default"] (what Nova's create answer says).
    security_groups: Mapped[str | None] = mapped_column(Text, nullable=True)
    # Revision 0011: the build's scheduler hints (os:scheduler_hints), JSON: what places it
    # should the API process that admitted it die first, and what a retry's filters see.
    scheduler_hints: Mapped[str | None] = mapped_column(Text, nullable=True)


class KeyPair(Base):
    """A user's key pair (``os-keypairs``): the public key, never the private one."""

    __tablename__ = "key_pairs"
    __table_args__ = (UniqueConstraint("user_id", "name"),)

    # Nova shows an integer id; the key pair is found by (user_id, name).
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[str] = mapped_column(String(NAME_LENGTH), nullable=False)
    name: Mapped[str] = mapped_column(String(NAME_LENGTH), nullable=False)
    type: Mapped[str] = mapped_column(String(KEY_TYPE_LENGTH), nullable=False)
    public_key: Mapped[str] = mapped_column(Text, nullable=False)
    fingerprint: Mapped[str] = mapped_column(String(NAME_LENGTH), nullable=False)
    created_at: Mapped[datetime.datetime] = mapped_column(DateTime, nullable=False,
                                                          default=utcnow)


class Flavor(Base):
    __tablename__ = "flavors"
    __table_args__ = (UniqueConstraint("name"),)

    # Nova's "flavorid": the id clients see (a uuid by default, any string given at creation).
    id: Mapped[str] = mapped_column(String(NAME_LENGTH), primary_key=True)
    name: Mapped[str] = mapped_column(String(NAME_LENGTH), nullable=False)
    vcpus: Mapped[int] = mapped_column(Integer, nullable=False)
    ram: Mapped[int] = mapped_column(Integer, nullable=False)
    disk: Mapped[int] = mapped_column(Integer, nullable=False)
    ephemeral: Mapped[int] = mapped_column(Integer, nullable=False)
    swap: Mapped[int] = mapped_column(Integer, nullable=False)
    is_public: Mapped[bool] = mapped_column(Boolean, nullable=False)
    description: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime.datetime] = mapped_column(DateTime, nullable=False,
                                                          default=utcnow)


class FlavorExtraSpec(Base):
    __tablename__ = "flavor_extra_specs"

    flavor_id: Mapped[str] = mapped_column(
        String(NAME_LENGTH), ForeignKey("flavors.id", ondelete="CASCADE"), primary_key=True)
    key: Mapped[str] = mapped_column(String(NAME_LENGTH), primary_key=True)
    value: Mapped[str] = mapped_column(String(NAME_LENGTH), nullable=False)


class FlavorProject(Base):
    """A project on a private flavor's access list (revision 0009; Nova's os-flavor-access)."""

    __tablename__ = "flavor_projects"

    flavor_id: Mapped[str] = mapped_column(
        String(NAME_LENGTH), ForeignKey("flavors.id", ondelete="CASCADE"), primary_key=True)
    project_id: Mapped[str] = mapped_column(String(NAME_LENGTH), primary_key=True)


class Aggregate(Base):
    """A host aggregate (revision 0012; Nova's os-aggregates): a named group of daemons."""

    __tablename__ = "aggregates"
    __table_args__ = (UniqueConstraint("name"), UniqueConstraint("uuid"))

    # Nova's aggregates are found by an integer id; the uuid is shown from 2.41.
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    uuid: Mapped[str] = mapped_column(String(UUID_LENGTH), nullable=False)
    name: Mapped[str] = mapped_column(String(NAME_LENGTH), nullable=False)
    created_at: Mapped[datetime.datetime] = mapped_column(DateTime, nullable=False,
                                                          default=utcnow)
    updated_at: Mapped[datetime.datetime | None] = mapped_column(DateTime, nullable=True)


class AggregateHost(Base):
    """A daemon (by host name) in an aggregate."""

    __tablename__ = "aggregate_hosts"

    aggregate_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("aggregates.id", ondelete="CASCADE"), primary_key=True)
    host: Mapped[str] = mapped_column(String(NAME_LENGTH), primary_key=True)


class AggregateMetadata(Base):
    """One metadata item of an aggregate (``availability_zone`` among them)."""

    __tablename__ = "aggregate_metadata"

    aggregate_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("aggregates.id", ondelete="CASCADE"), primary_key=True)
    key: Mapped[str] = mapped_column(String(NAME_LENGTH), primary_key=True)
    value: Mapped[str] = mapped_column(String(NAME_LENGTH), nullable=False)


class QuotaLimit(Base):
    __tablename__ = "quota_limits"

    project_id: Mapped[str] = mapped_column(String(NAME_LENGTH), primary_key=True)
    # "instances" or a resource class name (CUSTOM_GOLD).
    resource: Mapped[str] = mapped_column(String(NAME_LENGTH), primary_key=True)
    hard_limit: Mapped[int] = mapped_column(Integer, nullable=False)


class QuotaClass(Base):
    """A quota class's limit (revision 0010; Nova's os-quota-class-sets): the ``default``
    class's limits are the defaults of every project without its own."""

    __tablename__ = "quota_classes"

    class_name: Mapped[str] = mapped_column(String(NAME_LENGTH), primary_key=True)
    resource: Mapped[str] = mapped_column(String(NAME_LENGTH), primary_key=True)
    hard_limit: Mapped[int] = mapped_column(Integer, nullable=False)


class QuotaProject(Base):
    """A row to lock: a project's quota decisions are taken under it, one at a time."""

    __tablename__ = "quota_projects"

    project_id: Mapped[str] = mapped_column(String(NAME_LENGTH), primary_key=True)


class QuotaReservation(Base):
    """A build admitted by quota before its instance row exists (released once it does)."""

    __tablename__ = "quota_reservations"
    __table_args__ = (Index("ix_quota_reservations_project_id", "project_id"),)

    instance_uuid: Mapped[str] = mapped_column(String(UUID_LENGTH), primary_key=True)
    project_id: Mapped[str] = mapped_column(String(NAME_LENGTH), nullable=False)
    resource_class: Mapped[str] = mapped_column(String(NAME_LENGTH), nullable=False)
    created_at: Mapped[datetime.datetime] = mapped_column(DateTime, nullable=False,
                                                          default=utcnow)
    # Revision 0010: the flavor's vcpus and RAM (MB) the build holds against the cores and
    # ram quotas; NULL (written by code before): 0.
    cores: Mapped[int | None] = mapped_column(Integer, nullable=True)
    ram: Mapped[int | None] = mapped_column(Integer, nullable=True)
