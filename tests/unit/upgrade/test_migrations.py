"""The expand/contract checker (computed.upgrade.migrations): each operation judged, a release's
revisions in order, and computed's own migrations after the previous release's head."""

from __future__ import annotations

import textwrap

import pytest
import sqlalchemy as sa
from alembic.operations import ops

from computed.upgrade import migrations
from computed.upgrade.migrations import Revision
from computed.version import PREVIOUS_RELEASE

NONE = frozenset()


def column(name, *args, **kw):
    return sa.Column(name, *args, **kw)


@pytest.mark.parametrize('operation', [
    ops.CreateTableOp('t', [column('id', sa.Integer, primary_key=True)]),
    ops.AddColumnOp('instances', column('tags', sa.Text, nullable=True)),
    ops.AddColumnOp('instances', column('n', sa.Integer, nullable=False, server_default='0')),
    ops.CreateIndexOp('ix_a', 'instances', ['a']),
    ops.AlterColumnOp('instances', 'name', modify_nullable=True),
    ops.AlterColumnOp('instances', 'name', existing_type=sa.String(36),
                      modify_type=sa.String(255)),
    ops.AlterColumnOp('instances', 'name', existing_type=sa.String(36), modify_type=sa.Text()),
    ops.AlterColumnOp('providers', 'epoch', existing_type=sa.Integer(),
                      modify_type=sa.BigInteger()),
    ops.AlterColumnOp('instances', 'name', modify_server_default='x'),
], ids=lambda o: type(o).__name__)
def test_expansions(operation):
    assert migrations.judge(operation, NONE) == ''


@pytest.mark.parametrize('operation, said', [
    (ops.DropTableOp('flavors'), 'drops table flavors'),
    (ops.DropColumnOp('instances', 'tags'), 'drops column instances.tags'),
    (ops.DropIndexOp('ix_a', table_name='instances'), 'drops index ix_a'),
    (ops.DropConstraintOp('uq_a', 'instances'), 'drops constraint uq_a'),
    (ops.RenameTableOp('a', 'b'), 'renames table a to b'),
    (ops.AddColumnOp('instances', column('n', sa.Integer, nullable=False)),
     'adds NOT NULL column instances.n without a server default'),
    (ops.CreateIndexOp('uq_b', 'instances', ['b'], unique=True), 'adds unique index uq_b'),
    (ops.CreateUniqueConstraintOp('uq_c', 'instances', ['c']), 'adds constraint uq_c'),
    (ops.AlterColumnOp('providers', 'epoch', modify_name='claim_epoch'),
     'renames it to claim_epoch'),
    (ops.AlterColumnOp('instances', 'name', modify_nullable=False), 'makes it NOT NULL'),
    (ops.AlterColumnOp('instances', 'name', existing_type=sa.String(255),
                       modify_type=sa.String(36)), 'changes its type'),
    (ops.AlterColumnOp('instances', 'name', existing_type=sa.Text(),
                       modify_type=sa.String(255)), 'changes its type'),
    (ops.AlterColumnOp('instances', 'n', existing_type=sa.BigInteger(),
                       modify_type=sa.Integer()), 'changes its type'),
    # Without the existing type the change cannot be shown to widen.
    (ops.AlterColumnOp('instances', 'name', modify_type=sa.String(255)), 'changes its type'),
    (ops.ExecuteSQLOp('UPDATE instances SET x = 1'), 'online data migration'),
    (ops.BulkInsertOp(sa.table('flavors'), [{}]), 'inserts rows into existing table'),
], ids=lambda v: v if isinstance(v, str) else type(v).__name__)
def test_not_expansions(operation, said):
    assert said in migrations.judge(operation, NONE)


def test_anything_goes_on_a_table_the_revision_creates():
    new = frozenset({'quota_classes'})
    for operation in (ops.CreateIndexOp('uq', 'quota_classes', ['a'], unique=True),
                      ops.CreateUniqueConstraintOp('uq', 'quota_classes', ['a']),
                      ops.BulkInsertOp(sa.table('quota_classes'), [{'a': 1}]),
                      ops.AddColumnOp('quota_classes', column('n', sa.Integer,
                                                              nullable=False))):
        assert migrations.judge(operation, new) == ''
    assert 'drops table' in migrations.judge(ops.DropTableOp('quota_classes'), new)


def test_a_reference_to_an_existing_table_must_not_block_old_deletes():
    def table(*items):
        return ops.CreateTableOp('flavor_projects', [column('flavor_id', sa.String(255)),
                                                     *items])
    for ok in ('CASCADE', 'SET NULL', 'cascade'):
        assert migrations.judge(table(sa.ForeignKeyConstraint(
            ['flavor_id'], ['flavors.id'], ondelete=ok)), NONE) == ''
    said = migrations.judge(table(sa.ForeignKeyConstraint(['flavor_id'], ['flavors.id'])), NONE)
    assert said.startswith('creates table flavor_projects: refers to existing table(s) '
                           'flavors without ON DELETE CASCADE or SET NULL')
    # A reference between tables the revision creates is theirs alone.
    assert migrations.judge(table(sa.ForeignKeyConstraint(['flavor_id'], ['flavors.id'])),
                            frozenset({'flavors', 'flavor_projects'})) == ''
    added = ops.AddColumnOp('instances', column('flavor_id', sa.String(255),
                                                sa.ForeignKey('flavors.id'), nullable=True))
    assert 'adds column instances.flavor_id: refers to existing table(s) flavors' in \
        migrations.judge(added, NONE)


def rev(revision, down, *operations, contraction=False):
    return Revision(revision, down, contraction, tuple(operations))


EXPAND = ops.AddColumnOp('t', column('c', sa.Text, nullable=True))
DROP = ops.DropColumnOp('t', 'old')


def test_a_release_is_expansions_then_marked_contractions():
    history = [rev('2', '1', EXPAND), rev('1', None, DROP), rev('3', '2', DROP,
                                                                contraction=True)]
    # Only what comes after the base is judged (1 dropped a column before the release).
    assert migrations.problems(history, '1') == []
    assert migrations.expand_head(history, '1') == '2'
    assert migrations.contractions(history, '1') == ['3']
    unmarked = [rev('1', None), rev('2', '1', DROP)]
    assert [str(p) for p in migrations.problems(unmarked, '1')] == \
        ['revision 2: drops column t.old']
    late = [rev('1', None), rev('2', '1', DROP, contraction=True), rev('3', '2', EXPAND)]
    [problem] = migrations.problems(late, '1')
    assert problem.revision == '3' and 'after contraction 2' in problem.what
    assert migrations.expand_head(late, '1') == '1'
    with pytest.raises(ValueError, match='9'):
        migrations.problems(late, '9')


def test_a_script_that_reads_the_database_cannot_be_judged(tmp_path):
    (tmp_path / '0002_reads.py').write_text(textwrap.dedent('''
        from alembic import op
        revision = "0002"
        down_revision = "0001"
        def upgrade():
            op.get_bind().execute("SELECT 1")
    '''))
    (tmp_path / '0001_first.py').write_text(textwrap.dedent('''
        import sqlalchemy as sa
        from alembic import op
        revision = "0001"
        down_revision = None
        contraction = True
        def upgrade():
            with op.batch_alter_table("t", recreate="never") as batch:
                batch.drop_column("c")
    '''))
    first, second = migrations.read_revisions(tmp_path)
    assert first.contraction and [type(o) for o in first.operations] == [ops.DropColumnOp]
    assert first.operations[0].table_name == 't'
    assert second.unreadable.startswith('RuntimeError: the script reads the database')
    [problem] = migrations.problems([first, second], '0001')
    assert 'cannot be read without a database' in problem.what


def test_computed_migrations_after_the_previous_release_only_expand():
    revisions = migrations.read_revisions()
    # Read, not silently empty: 0005 (quota tables) has its three operations.
    by_id = {r.revision: r for r in revisions}
    assert [type(o).__name__ for o in by_id['0005'].operations] == \
        ['CreateTableOp', 'CreateTableOp', 'CreateIndexOp']
    assert [str(p) for p in migrations.check(revisions)] == []


def test_the_checker_sees_what_0_1_0_could_not_survive():
    # 0002 renamed two columns (the reason 0.1.0's docs said to stop everything for it):
    # had the previous release been before it, the check would have refused it.
    found = [str(p) for p in migrations.problems(migrations.read_revisions(), '0001')]
    assert 'revision 0002: alters column providers.epoch: renames it to claim_epoch ' \
           '(old code uses the old name)' in found
    assert PREVIOUS_RELEASE.schema_head == '0004'


def test_where_db_sync_goes():
    history = [rev('1', None), rev('2', '1', EXPAND), rev('3', '2', DROP, contraction=True),
               rev('4', '3', DROP, contraction=True)]
    target = migrations.sync_target
    assert target(history, '1', '1', contract=False) == '2'   # the expansions only
    assert target(history, '1', '2', contract=False) == '2'   # nothing more without --contract
    assert target(history, '1', '2', contract=True) == 'head'
    assert target(history, '1', None, contract=False) == 'head'  # an empty database: all
    assert target(history, '1', '3', contract=False) == 'head'  # already contracting
    plain = [rev('1', None), rev('2', '1', EXPAND)]
    assert target(plain, '1', '1', contract=False) == 'head'
    assert migrations.at_least(history, '3', '2') and not migrations.at_least(history, '1', '2')
    assert not migrations.at_least(history, None, '1')
    assert not migrations.at_least(history, '9', '1')


def test_touched_names_what_operations_change():
    history = [rev('1', None),
               rev('2', '1', DROP, ops.CreateIndexOp('uq_x', 't', ['x'], unique=True),
                   ops.AlterColumnOp('t', 'y', modify_nullable=False), contraction=True)]
    assert migrations.touched(history) == {'t', 't.old', 'uq_x', 't.y'}
