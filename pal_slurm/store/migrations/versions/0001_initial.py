"""Initial schema: topology, samples, ranking snapshots, app classes, decisions, held jobs,
heartbeats; seeds the default application -> class map.

Times are naive UTC columns (models.UtcDateTime adds the zone back on read).

Revision ID: 0001
Revises:
Create Date: 2026-11-23
"""

from __future__ import annotations

from datetime import datetime, timezone

import sqlalchemy as sa
from alembic import op

from pal_slurm.model.classes import DEFAULT_APP_CLASSES


revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('pal_app_classes',
    sa.Column('app', sa.String(length=128), nullable=False),
    sa.Column('perf_class', sa.String(length=8), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('app', name=op.f('pk_pal_app_classes'))
    )
    op.create_table('pal_decisions',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('job_id', sa.String(length=64), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('reason', sa.Text(), nullable=False),
    sa.Column('nodes', sa.JSON(), nullable=False),
    sa.Column('ranking_version', sa.Integer(), nullable=True),
    sa.Column('perf_class', sa.String(length=8), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_pal_decisions'))
    )
    op.create_index(op.f('ix_pal_decisions_created_at'), 'pal_decisions', ['created_at'], unique=False)
    op.create_index(op.f('ix_pal_decisions_job_id'), 'pal_decisions', ['job_id'], unique=False)

    op.create_table('pal_heartbeats',
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('holder', sa.String(length=255), nullable=False),
    sa.Column('beat_at', sa.DateTime(), nullable=False),
    sa.Column('details', sa.JSON(), nullable=False),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_pal_heartbeats'))
    )
    op.create_table('pal_held_jobs',
    sa.Column('job_id', sa.String(length=64), nullable=False),
    sa.Column('perf_class', sa.String(length=8), nullable=False),
    sa.Column('gpus', sa.Integer(), nullable=False),
    sa.Column('submitted_at', sa.DateTime(), nullable=False),
    sa.Column('released_at', sa.DateTime(), nullable=True),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.PrimaryKeyConstraint('job_id', name=op.f('pk_pal_held_jobs'))
    )
    op.create_index(op.f('ix_pal_held_jobs_state'), 'pal_held_jobs', ['state'], unique=False)

    op.create_table('pal_nodes',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=128), nullable=False),
    sa.Column('rack', sa.String(length=128), nullable=True),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_pal_nodes')),
    sa.UniqueConstraint('name', name=op.f('uq_pal_nodes_name'))
    )
    op.create_table('pal_ranking_snapshots',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('method', sa.String(length=32), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_pal_ranking_snapshots')),
    sa.UniqueConstraint('version', name=op.f('uq_pal_ranking_snapshots_version'))
    )
    op.create_table('pal_gpus',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('node_id', sa.Integer(), nullable=False),
    sa.Column('slot', sa.Integer(), nullable=False),
    sa.Column('uuid', sa.String(length=64), nullable=True),
    sa.Column('model', sa.String(length=128), nullable=True),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['node_id'], ['pal_nodes.id'], name=op.f('fk_pal_gpus_node_id_pal_nodes'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_pal_gpus')),
    sa.UniqueConstraint('node_id', 'slot', name='uq_pal_gpus_node_slot'),
    sa.UniqueConstraint('uuid', name=op.f('uq_pal_gpus_uuid'))
    )
    op.create_table('pal_ranking_entries',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('snapshot_id', sa.Integer(), nullable=False),
    sa.Column('gpu_id', sa.Integer(), nullable=False),
    sa.Column('perf_class', sa.String(length=8), nullable=False),
    sa.Column('score', sa.Float(), nullable=False),
    sa.Column('sf', sa.Float(), nullable=False),
    sa.Column('bin', sa.Integer(), nullable=False),
    sa.Column('flags', sa.JSON(), nullable=False),
    sa.ForeignKeyConstraint(['gpu_id'], ['pal_gpus.id'], name=op.f('fk_pal_ranking_entries_gpu_id_pal_gpus'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['snapshot_id'], ['pal_ranking_snapshots.id'], name=op.f('fk_pal_ranking_entries_snapshot_id_pal_ranking_snapshots'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_pal_ranking_entries')),
    sa.UniqueConstraint('snapshot_id', 'gpu_id', 'perf_class', name='uq_pal_ranking_entry')
    )
    op.create_index(op.f('ix_pal_ranking_entries_snapshot_id'), 'pal_ranking_entries', ['snapshot_id'], unique=False)

    op.create_table('pal_samples',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('gpu_id', sa.Integer(), nullable=False),
    sa.Column('perf_class', sa.String(length=8), nullable=False),
    sa.Column('backend', sa.String(length=32), nullable=False),
    sa.Column('metrics', sa.JSON(), nullable=False),
    sa.Column('score', sa.Float(), nullable=True),
    sa.Column('busy', sa.Boolean(), nullable=False),
    sa.Column('job_id', sa.String(length=64), nullable=True),
    sa.Column('taken_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['gpu_id'], ['pal_gpus.id'], name=op.f('fk_pal_samples_gpu_id_pal_gpus'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_pal_samples'))
    )
    op.create_index('ix_pal_samples_gpu_class_time', 'pal_samples', ['gpu_id', 'perf_class', 'taken_at'], unique=False)
    op.create_index(op.f('ix_pal_samples_taken_at'), 'pal_samples', ['taken_at'], unique=False)

    app_classes = sa.table(
        'pal_app_classes',
        sa.column('app', sa.String),
        sa.column('perf_class', sa.String),
        sa.column('updated_at', sa.DateTime),
    )
    seeded_at = datetime.now(timezone.utc).replace(tzinfo=None)
    op.bulk_insert(
        app_classes,
        [
            {'app': app, 'perf_class': cls, 'updated_at': seeded_at}
            for app, cls in sorted(DEFAULT_APP_CLASSES.items())
        ],
    )


def downgrade() -> None:
    op.drop_index(op.f('ix_pal_samples_taken_at'), table_name='pal_samples')
    op.drop_index('ix_pal_samples_gpu_class_time', table_name='pal_samples')

    op.drop_table('pal_samples')
    op.drop_index(op.f('ix_pal_ranking_entries_snapshot_id'), table_name='pal_ranking_entries')

    op.drop_table('pal_ranking_entries')
    op.drop_table('pal_gpus')
    op.drop_table('pal_ranking_snapshots')
    op.drop_table('pal_nodes')
    op.drop_index(op.f('ix_pal_held_jobs_state'), table_name='pal_held_jobs')

    op.drop_table('pal_held_jobs')
    op.drop_table('pal_heartbeats')
    op.drop_index(op.f('ix_pal_decisions_job_id'), table_name='pal_decisions')
    op.drop_index(op.f('ix_pal_decisions_created_at'), table_name='pal_decisions')

    op.drop_table('pal_decisions')
    op.drop_table('pal_app_classes')
