"""The site's run-time switches (pause, per-partition modes): one row per switch.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('pal_switches',
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('value', sa.String(length=64), nullable=False),
    sa.Column('changed_at', sa.DateTime(), nullable=False),
    sa.Column('changed_by', sa.String(length=255), nullable=False),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_pal_switches'))
    )


def downgrade() -> None:
    op.drop_table('pal_switches')
