"""SQLAlchemy 2 tables of the store (typed declarative). Only `sql.py` and migrations use them.

Changing a table means a new Alembic revision in `migrations/versions/`; the migration test
checks that the migrated schema equals these models.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Optional

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import TypeDecorator

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UtcDateTime(TypeDecorator[datetime]):
    """Stored as naive UTC (SQLite has no time zones), handed back as aware UTC."""

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: Optional[datetime], dialect: Any) -> Optional[datetime]:
        if value is None:
            return None
        if value.tzinfo is not None:
            value = value.astimezone(timezone.utc)
        return value.replace(tzinfo=None)

    def process_result_value(self, value: Optional[datetime], dialect: Any) -> Optional[datetime]:
        if value is None:
            return None
        return value.replace(tzinfo=timezone.utc)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class NodeRow(Base):
    __tablename__ = "pal_nodes"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    rack: Mapped[Optional[str]] = mapped_column(String(128))
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime())

    gpus: Mapped[list["GpuRow"]] = relationship(back_populates="node")


class GpuRow(Base):
    __tablename__ = "pal_gpus"
    __table_args__ = (UniqueConstraint("node_id", "slot", name="uq_pal_gpus_node_slot"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    node_id: Mapped[int] = mapped_column(ForeignKey("pal_nodes.id", ondelete="CASCADE"))
    slot: Mapped[int] = mapped_column(Integer)
    uuid: Mapped[Optional[str]] = mapped_column(String(64), unique=True)
    model: Mapped[Optional[str]] = mapped_column(String(128))
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime())

    node: Mapped[NodeRow] = relationship(back_populates="gpus")


class SampleRow(Base):
    __tablename__ = "pal_samples"
    __table_args__ = (Index("ix_pal_samples_gpu_class_time", "gpu_id", "perf_class", "taken_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    gpu_id: Mapped[int] = mapped_column(ForeignKey("pal_gpus.id", ondelete="CASCADE"))
    perf_class: Mapped[str] = mapped_column(String(8))
    backend: Mapped[str] = mapped_column(String(32))
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON)
    score: Mapped[Optional[float]] = mapped_column(Float)
    busy: Mapped[bool] = mapped_column(Boolean, default=False)
    job_id: Mapped[Optional[str]] = mapped_column(String(64))
    taken_at: Mapped[datetime] = mapped_column(UtcDateTime(), index=True)


class RankingSnapshotRow(Base):
    __tablename__ = "pal_ranking_snapshots"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[int] = mapped_column(Integer, unique=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    method: Mapped[str] = mapped_column(String(32))

    entries: Mapped[list["RankingEntryRow"]] = relationship(
        back_populates="snapshot", cascade="all, delete-orphan", order_by="RankingEntryRow.id"
    )


class RankingEntryRow(Base):
    __tablename__ = "pal_ranking_entries"
    __table_args__ = (
        UniqueConstraint("snapshot_id", "gpu_id", "perf_class", name="uq_pal_ranking_entry"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    snapshot_id: Mapped[int] = mapped_column(
        ForeignKey("pal_ranking_snapshots.id", ondelete="CASCADE"), index=True
    )
    gpu_id: Mapped[int] = mapped_column(ForeignKey("pal_gpus.id", ondelete="CASCADE"))
    perf_class: Mapped[str] = mapped_column(String(8))
    score: Mapped[float] = mapped_column(Float)
    sf: Mapped[float] = mapped_column(Float)
    bin: Mapped[int] = mapped_column(Integer)
    flags: Mapped[list[str]] = mapped_column(JSON)

    snapshot: Mapped[RankingSnapshotRow] = relationship(back_populates="entries")
    gpu: Mapped[GpuRow] = relationship()


class AppClassRow(Base):
    __tablename__ = "pal_app_classes"

    app: Mapped[str] = mapped_column(String(128), primary_key=True)
    perf_class: Mapped[str] = mapped_column(String(8))
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime())


class DecisionRow(Base):
    __tablename__ = "pal_decisions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[str] = mapped_column(String(64), index=True)
    kind: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text, default="")
    nodes: Mapped[dict[str, list[int]]] = mapped_column(JSON)
    ranking_version: Mapped[Optional[int]] = mapped_column(Integer)
    perf_class: Mapped[Optional[str]] = mapped_column(String(8))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), index=True)


class HeldJobRow(Base):
    __tablename__ = "pal_held_jobs"

    job_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    perf_class: Mapped[str] = mapped_column(String(8))
    gpus: Mapped[int] = mapped_column(Integer)
    submitted_at: Mapped[datetime] = mapped_column(UtcDateTime())
    released_at: Mapped[Optional[datetime]] = mapped_column(UtcDateTime())
    state: Mapped[str] = mapped_column(String(16), index=True)


class SwitchRow(Base):
    __tablename__ = "pal_switches"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(64))
    changed_at: Mapped[datetime] = mapped_column(UtcDateTime())
    changed_by: Mapped[str] = mapped_column(String(255))


class HeartbeatRow(Base):
    __tablename__ = "pal_heartbeats"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    holder: Mapped[str] = mapped_column(String(255))
    beat_at: Mapped[datetime] = mapped_column(UtcDateTime())
    details: Mapped[dict[str, Any]] = mapped_column(JSON)
