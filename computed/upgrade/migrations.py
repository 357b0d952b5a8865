"""Expand/contract: which schema revisions the previous release's code keeps working against.

Owns the rule of a rolling upgrade's database step (docs/upgrades.md, "Schema changes"): every
Alembic revision after the previous release's schema head
(:data:`computed.version.PREVIOUS_RELEASE`) only *expands* the schema, so that daemons,
reporters and API workers of that release keep working while the new release's ``db sync`` has
run under them; whatever removes or narrows is a *contraction*, marked in its script
(``contraction = True`` at module level), shipped after this release's expansions, applied by
``computed-manage db sync --contract`` only once no service of the previous release is live.

An expansion is, operation by operation (:func:`judge`):

* a new table (its columns, keys, indexes and constraints are free: no old code uses it, but a
  foreign key to an existing table must say ON DELETE CASCADE or SET NULL, or old code could not
  delete a row new code refers to), and rows bulk-inserted into a table made by the same
  revision;
* a new column that is nullable or has a server default (old code's INSERTs leave it out), with
  the same rule for a foreign key;
* a new non-unique index; a unique index or a constraint only on a table made by the same
  revision (on an existing table it could refuse what old code writes);
* an altered column that only widens: NOT NULL -> NULL, a longer string, a wider integer, a
  server default or a comment.

Everything else is not: a drop (table, column, index, constraint), a rename, a type narrowed or
changed, NOT NULL set, a statement run (``op.execute``: data that must be rewritten is an
online data migration, :mod:`computed.upgrade.data_migrations`), and any operation this module
does not know. :func:`problems` applies the rule to a release's revisions in order, and also
refuses an expansion after a contraction (``db sync`` stops before the first contraction, so
the expansions behind it would wait for the contraction).

The pure part judges alembic's operation objects (:mod:`alembic.operations.ops`); the I/O part
(:func:`read_revisions`) reads them by running each script's ``upgrade()`` against a recorder,
in a copy of the module of its own, without any database.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic.operations import Operations, ops
from alembic.operations.base import BatchOperations
from alembic.runtime.migration import MigrationContext


@dataclass(frozen=True)
class Revision:
    """One Alembic revision as the checker sees it."""
    revision: str
    down_revision: str | None
    contraction: bool = False
    operations: tuple[ops.MigrateOperation, ...] = ()
    #: Why the operations could not be read (the script's ``upgrade()`` raised): not judged.
    unreadable: str = ''
    path: str = ''


@dataclass(frozen=True)
class Problem:
    revision: str
    what: str

    def __str__(self) -> str:
        return f'revision {self.revision}: {self.what}'


# -- pure ----------------------------------------------------------------------------------

def _column_name(column: Any) -> str:
    return getattr(column, 'name', None) or str(column)


def _widens(old: Any, new: Any) -> bool:
    """Whether a column of type ``old`` changed to ``new`` takes everything it took before."""
    if old is None or new is None:
        return False  # without existing_type, the change cannot be judged
    old_type, new_type = sa.types.to_instance(old), sa.types.to_instance(new)
    if isinstance(old_type, sa.String) and isinstance(new_type, sa.String):
        if isinstance(new_type, sa.Text):
            return True
        if isinstance(old_type, sa.Text):
            return False
        return (new_type.length is None
                or (old_type.length is not None and new_type.length >= old_type.length))
    order = (sa.SmallInteger, sa.Integer, sa.BigInteger)
    ranks = [next((rank for rank, kind in enumerate(order) if type(t) is kind), None)
             for t in (old_type, new_type)]
    if None not in ranks:
        return ranks[1] >= ranks[0]
    return False


def _foreign_keys(items: Iterable[Any]) -> list[tuple[str, str | None]]:
    """``(referenced table, ondelete)`` of every foreign key among columns and constraints."""
    found = []
    for item in items:
        if isinstance(item, sa.ForeignKeyConstraint):
            found += [(element.target_fullname.split('.')[0], item.ondelete)
                      for element in item.elements]
        elif isinstance(item, sa.Column):
            found += [(key.target_fullname.split('.')[0], key.ondelete)
                      for key in item.foreign_keys]
    return found


def _blocking_references(items: Iterable[Any], new_tables: frozenset[str]) -> str:
    """A foreign key to an existing table that would refuse old code's delete of a row new code
    refers to (neither ON DELETE CASCADE nor SET NULL)."""
    blocking = sorted({table for table, ondelete in _foreign_keys(items)
                       if table not in new_tables
                       and (ondelete or '').upper() not in ('CASCADE', 'SET NULL')})
    if not blocking:
        return ''
    return (f"refers to existing table(s) {', '.join(blocking)} without ON DELETE CASCADE or "
            f"SET NULL (old code deleting a row that new code refers to would be refused)")


def judge(operation: ops.MigrateOperation, new_tables: frozenset[str]) -> str:
    """Why ``operation`` is not an expansion ('' when it is). ``new_tables``: the tables the
    same revision creates (what is done to them no old code can notice, but for foreign keys
    to existing tables: see :func:`_blocking_references`)."""
    if isinstance(operation, ops.CreateTableOp):
        blocking = _blocking_references(operation.columns, new_tables)
        return f'creates table {operation.table_name}: {blocking}' if blocking else ''
    table = getattr(operation, 'table_name', None)
    if isinstance(operation, ops.BulkInsertOp):
        name = getattr(operation.table, 'name', operation.table)
        return '' if name in new_tables else f'inserts rows into existing table {name}'
    if table in new_tables and not isinstance(operation, (ops.DropTableOp, ops.RenameTableOp)):
        return ''
    if isinstance(operation, ops.AddColumnOp):
        column = operation.column
        blocking = _blocking_references([column], new_tables)
        if blocking:
            return f'adds column {table}.{column.name}: {blocking}'
        if column.nullable or column.server_default is not None:
            return ''
        return (f'adds NOT NULL column {table}.{column.name} without a server default (old '
                f'code inserts rows without it)')
    if isinstance(operation, ops.CreateIndexOp):
        if not operation.unique:
            return ''
        return (f'adds unique index {operation.index_name} on existing table {table} (it may '
                f'refuse rows old code writes)')
    if isinstance(operation, ops.AlterColumnOp):
        return _judge_alter(operation)
    if isinstance(operation, (ops.CreateTableCommentOp, ops.DropTableCommentOp)):
        return ''
    kinds = {
        ops.DropTableOp: lambda o: f'drops table {o.table_name}',
        ops.DropColumnOp: lambda o: f'drops column {o.table_name}.{o.column_name}',
        ops.DropIndexOp: lambda o: f'drops index {o.index_name}',
        ops.DropConstraintOp: lambda o: f'drops constraint {o.constraint_name} of {table}',
        ops.RenameTableOp: lambda o: f'renames table {o.table_name} to {o.new_table_name}',
        ops.AddConstraintOp: lambda o: (f'adds constraint {o.constraint_name} to existing '
                                        f'table {table} (it may refuse rows old code writes)'),
        ops.ExecuteSQLOp: lambda o: ('runs a statement (op.execute): data that must be '
                                     'rewritten is an online data migration'),
    }
    for kind, say in kinds.items():
        if isinstance(operation, kind):
            return say(operation)
    return f'{type(operation).__name__} is not known to be an expansion'


def _judge_alter(operation: ops.AlterColumnOp) -> str:
    where = f'{operation.table_name}.{operation.column_name}'
    said = []
    if operation.modify_name:
        said.append(f'renames it to {operation.modify_name} (old code uses the old name)')
    if operation.modify_nullable is False:
        said.append('makes it NOT NULL (old code may write NULL)')
    if operation.modify_type is not None and \
            not _widens(operation.existing_type, operation.modify_type):
        said.append(f'changes its type from {operation.existing_type} to '
                    f'{operation.modify_type} (only a widening is an expansion; give '
                    f'existing_type)')
    return f"alters column {where}: {'; '.join(said)}" if said else ''


def revision_problems(revision: Revision) -> list[Problem]:
    """What makes a revision not an expansion (nothing for a marked contraction)."""
    if revision.unreadable:
        return [Problem(revision.revision, f'its operations cannot be read without a '
                                           f'database: {revision.unreadable}')]
    if revision.contraction:
        return []
    new_tables = frozenset(o.table_name for o in revision.operations
                           if isinstance(o, ops.CreateTableOp))
    return [Problem(revision.revision, what) for what in
            (judge(o, new_tables) for o in revision.operations) if what]


def after(revisions: Sequence[Revision], base: str) -> list[Revision]:
    """The revisions newer than ``base``, oldest first (``revisions``: a linear history in any
    order). ValueError if ``base`` is not one of them."""
    by_down = {r.down_revision: r for r in revisions}
    if base not in {r.revision for r in revisions}:
        raise ValueError(f'revision {base} (the previous release\'s schema head) is not '
                         f'among the migrations')
    chain, current = [], by_down.get(base)
    while current is not None:
        chain.append(current)
        current = by_down.get(current.revision)
    return chain


def problems(revisions: Sequence[Revision], base: str) -> list[Problem]:
    """Every reason the revisions after ``base`` are not a release's expansions followed by its
    contractions."""
    found: list[Problem] = []
    contraction_seen = ''
    for revision in after(revisions, base):
        found += revision_problems(revision)
        if revision.contraction:
            contraction_seen = contraction_seen or revision.revision
        elif contraction_seen:
            found.append(Problem(revision.revision, f'an expansion after contraction '
                                                    f'{contraction_seen}: db sync stops '
                                                    f'before a contraction, so it would wait '
                                                    f'with it; order it before'))
    return found


def expand_head(revisions: Sequence[Revision], base: str) -> str:
    """The newest revision ``db sync`` applies without ``--contract``: the one before this
    release's first contraction (the head when there is none)."""
    target = base
    for revision in after(revisions, base):
        if revision.contraction:
            break
        target = revision.revision
    return target


def sync_target(revisions: Sequence[Revision], base: str, current: str | None,
                contract: bool) -> str:
    """Where ``db sync`` takes a database at ``current``: the newest revision (``head``) with
    ``contract``, for an empty database (no service of an older release can be using it) or
    one already past a contraction of this release; else :func:`expand_head`."""
    if contract or current is None:
        return 'head'
    chain = [r.revision for r in after(revisions, base)]
    first = next((r.revision for r in after(revisions, base) if r.contraction), None)
    if first is None or (current in chain and chain.index(current) >= chain.index(first)):
        return 'head'
    return expand_head(revisions, base)


def at_least(revisions: Sequence[Revision], current: str | None, wanted: str) -> bool:
    """Whether a database at ``current`` has ``wanted`` applied (``revisions``: a linear
    history; an unknown ``current`` is not)."""
    order = {r.revision: index for index, r in enumerate(
        after(revisions, _root(revisions)), start=1)}
    order[_root(revisions)] = 0
    return current in order and wanted in order and order[current] >= order[wanted]


def _root(revisions: Sequence[Revision]) -> str:
    return next(r.revision for r in revisions if r.down_revision is None)


def touched(revisions: Iterable[Revision]) -> set[str]:
    """The schema objects the operations of ``revisions`` name: tables, ``table.column``,
    indexes and constraints (what a database waiting for them may lack or still hold)."""
    names: set[str] = set()
    for revision in revisions:
        for operation in revision.operations:
            table = getattr(operation, 'table_name', None)
            if table:
                names.add(table)
            for attribute in ('index_name', 'constraint_name'):
                if getattr(operation, attribute, None):
                    names.add(str(getattr(operation, attribute)))
            column = getattr(operation, 'column', None)
            column_name = getattr(column, 'name', None) or getattr(operation, 'column_name', None)
            if table and column_name:
                names.add(f'{table}.{column_name}')
    return names


def contractions(revisions: Sequence[Revision], base: str) -> list[str]:
    """This release's contraction revisions, oldest first."""
    return [r.revision for r in after(revisions, base) if r.contraction]


# -- I/O: the operations of the real scripts -----------------------------------------------

class _Batch(BatchOperations):
    """``with op.batch_alter_table(...) as batch``: records what ``batch`` is asked to do."""

    def __init__(self, recorder: _Recorder, table_name: str, schema: str | None):
        super().__init__(recorder.migration_context,
                         impl=_BatchTarget(table_name, schema))  # type: ignore[arg-type]
        self._recorder = recorder

    def invoke(self, operation: ops.MigrateOperation) -> Any:
        self._recorder.recorded.append(operation)


@dataclass
class _BatchTarget:
    # What alembic's batch operations read of their implementation to build an operation.
    table_name: str
    schema: str | None


class _Recorder(Operations):
    """An ``op`` that records each operation instead of running it."""

    def __init__(self, migration_context: MigrationContext):
        super().__init__(migration_context)
        self.recorded: list[ops.MigrateOperation] = []

    def invoke(self, operation: ops.MigrateOperation) -> Any:
        self.recorded.append(operation)

    @contextlib.contextmanager
    def batch_alter_table(self, table_name: str, schema: str | None = None,
                          **_kw: Any) -> Iterator[_Batch]:
        yield _Batch(self, table_name, schema)

    def get_bind(self) -> Any:
        raise RuntimeError('the script reads the database (op.get_bind)')


def _load(path: Path) -> Any:
    # A module of its own per read: alembic keeps the scripts it loaded, whose ``op`` global
    # must stay alembic's.
    spec = importlib.util.spec_from_file_location(f'_computed_revision_{path.stem}', path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def read_revision(path: Path, dialect: str = 'postgresql') -> Revision:
    module = _load(path)
    context = MigrationContext.configure(dialect_name=dialect, opts={'as_sql': True})
    recorder = _Recorder(context)
    module.op = recorder
    unreadable = ''
    try:
        module.upgrade()
    except Exception as exc:  # the script needs a database: it cannot be judged
        unreadable = f'{type(exc).__name__}: {" ".join(str(exc).split())}'
    return Revision(revision=module.revision, down_revision=module.down_revision,
                    contraction=bool(getattr(module, 'contraction', False)),
                    operations=tuple(recorder.recorded), unreadable=unreadable,
                    path=str(path))


def read_revisions(directory: Path | None = None) -> list[Revision]:
    """Every revision script of ``directory`` (computed's own migrations by default)."""
    if directory is None:
        from computed.db import MIGRATIONS
        directory = MIGRATIONS / 'versions'
    return [read_revision(path) for path in sorted(directory.glob('*.py'))
            if path.name != '__init__.py']


def check(revisions: Iterable[Revision] | None = None, base: str | None = None
          ) -> list[Problem]:
    """:func:`problems` of computed's own migrations after the previous release's head."""
    from computed.version import PREVIOUS_RELEASE
    revisions = read_revisions() if revisions is None else list(revisions)
    return problems(list(revisions), PREVIOUS_RELEASE.schema_head if base is None else base)
