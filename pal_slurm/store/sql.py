"""The Repository on SQLAlchemy: SQLite or PostgreSQL, one short transaction per call.

Every driver failure leaves this module as a store error (`engine.translate`): pald catches
`StoreUnavailable` and keeps serving from memory; nothing above the store sees SQLAlchemy.
Upserts are select-then-write in one transaction, portable across both backends; a concurrent
writer that wins a race makes the loser retry (IntegrityError), a bounded number of times.
On SQLite a file guard (file_guard.py) refuses to read or write a file deleted under us;
`interrupt()` breaks a call stuck in the driver (interrupt.py), for a caller's watchdog.
"""

from __future__ import annotations

from contextlib import contextmanager
from datetime import datetime
from typing import Any, Callable, Iterable, Iterator, TypeVar

from sqlalchemy import ColumnElement, CursorResult, Engine, Result, Select, delete, func, select, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.orm import Session, selectinload, sessionmaker

from pal_slurm.model.decision import DecisionKind
from pal_slurm.store.engine import WRITE_OPTION, sqlite_path, translate
from pal_slurm.store.errors import InvalidRecord
from pal_slurm.store.file_guard import SqliteFileGuard
from pal_slurm.store.interrupt import OpenConnections
from pal_slurm.store.models import (
    AppClassRow,
    Base,
    DecisionRow,
    GpuRow,
    HeartbeatRow,
    HeldJobRow,
    NodeRow,
    RankingEntryRow,
    RankingSnapshotRow,
    SampleRow,
    SwitchRow,
)
from pal_slurm.store.records import (
    DecisionRecord,
    GpuRecord,
    HeldJob,
    HeldState,
    Heartbeat,
    NodeRecord,
    RankingEntry,
    RankingSnapshot,
    Sample,
    Switch,
    sample_from_row,
    stored_metrics,
    utcnow,
)
from pal_slurm.ranking.snapshot import utc_from_epoch
from pal_slurm.store.repository import (
    as_utc,
    check_batch_uuids,
    check_class,
    check_entries,
    check_gpu,
    check_held,
    check_json,
    check_name,
    check_nodes_map,
    check_sample,
    check_switch,
    normalise_app,
)

T = TypeVar("T")
CONFLICT_RETRIES = 3
# pg_advisory_xact_lock key guarding ranking version allocation ("palrank" in ASCII).
RANKING_VERSION_LOCK = 0x70616C72616E6B


class SqlRepository:
    """Repository over an Engine (see `bootstrap.open_store` to get one migrated)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.url = engine.url
        self._sessions = sessionmaker(engine, expire_on_commit=False)
        self._write_sessions = sessionmaker(
            engine.execution_options(**{WRITE_OPTION: True}), expire_on_commit=False
        )
        self._in_use = OpenConnections(engine)
        path = sqlite_path(engine.url) if engine.dialect.name == "sqlite" else None
        self._guard = SqliteFileGuard(path, engine.dispose) if path else None

    def interrupt(self) -> int:
        """Break the calls in flight on other threads (they fail with StoreUnavailable)."""
        return self._in_use.interrupt()

    # ---- plumbing ---------------------------------------------------------------------
    @contextmanager
    def _read(self) -> Iterator[Session]:
        with self._in_use.in_call():
            if self._guard is not None:
                self._guard.before()
            try:
                with self._sessions() as session:
                    yield session
            except (sa_exc.SQLAlchemyError, OSError) as err:
                raise translate(err, self.url) from err

    def _write(self, work: Callable[[Session], T]) -> T:
        """Run `work` in one transaction; retry on a lost race; translate failures."""
        with self._in_use.in_call():
            return self._write_now(work)

    def _write_now(self, work: Callable[[Session], T]) -> T:
        if self._guard is not None:
            self._guard.before()
        for attempt in range(CONFLICT_RETRIES + 1):
            try:
                with self._write_sessions.begin() as session:
                    result = work(session)
                if self._guard is not None:
                    self._guard.after_write()
                return result
            except sa_exc.IntegrityError as err:
                if attempt == CONFLICT_RETRIES:
                    raise translate(err, self.url) from err
            except (sa_exc.SQLAlchemyError, OSError) as err:
                raise translate(err, self.url) from err
        raise AssertionError("unreachable")

    @staticmethod
    def _node(session: Session, name: str, rack: str | None = None) -> NodeRow:
        row = session.scalar(select(NodeRow).where(NodeRow.name == name))
        if row is None:
            row = NodeRow(name=name, rack=rack, updated_at=utcnow())
            session.add(row)
            session.flush()
        return row

    def _gpu(
        self,
        session: Session,
        cache: dict[tuple[str, int], GpuRow],
        node: str,
        slot: int,
        uuid: str | None = None,
        model: str | None = None,
    ) -> GpuRow:
        row = cache.get((node, slot))
        if row is None:
            row = session.scalar(
                select(GpuRow).join(NodeRow).where(NodeRow.name == node, GpuRow.slot == slot)
            )
        if uuid is not None and (row is None or row.uuid != uuid):
            other = session.scalar(select(GpuRow).where(GpuRow.uuid == uuid))
            if other is not None and other is not row:  # the GPU moved here: uuid follows it
                other.uuid = None
                other.updated_at = utcnow()
                session.flush()
        if row is None:
            row = GpuRow(
                node_id=self._node(session, node).id,
                slot=slot,
                uuid=uuid,
                model=model,
                updated_at=utcnow(),
            )
            session.add(row)
        elif (uuid is not None and row.uuid != uuid) or (model is not None and row.model != model):
            row.uuid = uuid if uuid is not None else row.uuid
            row.model = model if model is not None else row.model
            row.updated_at = utcnow()
        session.flush()
        cache[(node, slot)] = row
        return row

    # ---- topology ---------------------------------------------------------------------
    def upsert_nodes(self, nodes: Iterable[NodeRecord]) -> None:
        nodes = list(nodes)
        for n in nodes:
            check_name(n.name, "node name")

        def work(session: Session) -> None:
            for n in nodes:
                row = self._node(session, n.name, n.rack)
                if row.rack != n.rack:
                    row.rack = n.rack
                    row.updated_at = utcnow()

        self._write(work)

    def upsert_gpus(self, gpus: Iterable[GpuRecord]) -> None:
        gpus = [check_gpu(g) for g in gpus]
        check_batch_uuids((g.node, g.slot, g.uuid) for g in gpus)

        def work(session: Session) -> None:
            cache: dict[tuple[str, int], GpuRow] = {}
            for g in gpus:
                self._gpu(session, cache, g.node, g.slot, g.uuid, g.model)

        self._write(work)

    def nodes(self) -> list[NodeRecord]:
        with self._read() as session:
            rows = session.scalars(select(NodeRow).order_by(NodeRow.name))
            return [NodeRecord(r.name, r.rack) for r in rows]

    def gpus(self) -> list[GpuRecord]:
        with self._read() as session:
            rows = session.execute(
                select(NodeRow.name, GpuRow.slot, GpuRow.uuid, GpuRow.model)
                .join(GpuRow.node)
                .order_by(NodeRow.name, GpuRow.slot)
            )
            return [GpuRecord(n, s, u, m) for n, s, u, m in rows]

    # ---- samples --------------------------------------------------------------------
    def add_samples(self, samples: Iterable[Sample]) -> int:
        checked = [check_sample(s) for s in samples]
        check_batch_uuids((s.node, s.slot, s.uuid) for s in checked)

        def work(session: Session) -> int:
            cache: dict[tuple[str, int], GpuRow] = {}
            rows = []
            for s in checked:
                gpu = self._gpu(session, cache, s.node, s.slot, s.uuid)
                rows.append(
                    SampleRow(
                        gpu_id=gpu.id,
                        perf_class=s.perf_class,
                        backend=s.backend,
                        metrics=check_json(stored_metrics(s), "metrics"),
                        score=None,
                        busy=bool(s.busy),
                        job_id=s.job_id,
                        taken_at=utc_from_epoch(float(s.taken_at)),
                    )
                )
            session.add_all(rows)
            return len(rows)

        return self._write(work)

    def recent_samples(
        self, since: datetime, *, perf_class: str | None = None, include_busy: bool = False
    ) -> list[Sample]:
        query = (
            select(SampleRow, NodeRow.name, GpuRow.slot, GpuRow.uuid)
            .join(GpuRow, SampleRow.gpu_id == GpuRow.id)
            .join(NodeRow, GpuRow.node_id == NodeRow.id)
            .where(SampleRow.taken_at >= as_utc(since))
            .order_by(SampleRow.taken_at, NodeRow.name, GpuRow.slot, SampleRow.id)
        )
        if perf_class is not None:
            query = query.where(SampleRow.perf_class == perf_class)
        if not include_busy:
            query = query.where(SampleRow.busy.is_(False))
        with self._read() as session:
            found = (
                sample_from_row(node, slot, r.perf_class, r.backend, as_utc(r.taken_at), r.metrics or {}, r.score,
                                r.busy, r.job_id, uuid)
                for r, node, slot, uuid in session.execute(query)
            )
            return [s for s in found if s is not None]

    # ---- rankings -------------------------------------------------------------------
    def write_ranking(
        self, method: str, entries: Iterable[RankingEntry], created_at: datetime | None = None
    ) -> RankingSnapshot:
        check_name(method, "ranking method")
        rows = check_entries(entries)
        when = as_utc(created_at or utcnow())

        def work(session: Session) -> int:
            if self.engine.dialect.name == "postgresql":
                # Serialise version allocation between writers (released at commit);
                # SQLite serialises writers by itself.
                session.execute(
                    text("SELECT pg_advisory_xact_lock(:key)"), {"key": RANKING_VERSION_LOCK}
                )
            version = (session.scalar(select(func.max(RankingSnapshotRow.version))) or 0) + 1
            snap = RankingSnapshotRow(version=version, created_at=when, method=method)
            session.add(snap)
            session.flush()
            cache: dict[tuple[str, int], GpuRow] = {}
            session.add_all(
                RankingEntryRow(
                    snapshot_id=snap.id,
                    gpu_id=self._gpu(session, cache, e.node, e.slot).id,
                    perf_class=e.perf_class,
                    score=float(e.score),
                    sf=float(e.sf),
                    bin=e.bin,
                    flags=list(e.flags),
                )
                for e in rows
            )
            return version

        version = self._write(work)
        snap = self.ranking(version)
        assert snap is not None
        return snap

    def _load_ranking(self, where) -> RankingSnapshot | None:  # type: ignore[no-untyped-def]
        with self._read() as session:
            snap = session.scalar(
                select(RankingSnapshotRow)
                .where(where)
                .options(
                    selectinload(RankingSnapshotRow.entries)
                    .selectinload(RankingEntryRow.gpu)
                    .selectinload(GpuRow.node)
                )
            )
            if snap is None:
                return None
            return RankingSnapshot(
                version=snap.version,
                created_at=snap.created_at,
                method=snap.method,
                entries=tuple(
                    RankingEntry(
                        node=e.gpu.node.name,
                        slot=e.gpu.slot,
                        perf_class=e.perf_class,
                        score=e.score,
                        sf=e.sf,
                        bin=e.bin,
                        flags=tuple(e.flags or ()),
                    )
                    for e in snap.entries
                ),
            )

    def latest_ranking(self) -> RankingSnapshot | None:
        latest = select(func.max(RankingSnapshotRow.version)).scalar_subquery()
        return self._load_ranking(RankingSnapshotRow.version == latest)

    def ranking(self, version: int) -> RankingSnapshot | None:
        return self._load_ranking(RankingSnapshotRow.version == version)

    # ---- application classes --------------------------------------------------------
    def app_classes(self) -> dict[str, str]:
        with self._read() as session:
            rows = session.execute(select(AppClassRow.app, AppClassRow.perf_class))
            return dict(sorted((a, c) for a, c in rows))

    def set_app_class(self, app: str, perf_class: str) -> None:
        app = normalise_app(app)
        check_class(perf_class)

        def work(session: Session) -> None:
            row = session.get(AppClassRow, app)
            if row is None:
                session.add(AppClassRow(app=app, perf_class=perf_class, updated_at=utcnow()))
            else:
                row.perf_class = perf_class
                row.updated_at = utcnow()

        self._write(work)

    def remove_app_class(self, app: str) -> bool:
        app = normalise_app(app)

        def work(session: Session) -> bool:
            return bool(_rows_affected(session.execute(delete(AppClassRow).where(AppClassRow.app == app))))

        return self._write(work)

    # ---- decisions ------------------------------------------------------------------
    def record_decision(self, decision: DecisionRecord) -> None:
        check_name(decision.job_id, "job id")
        nodes = check_nodes_map(decision.nodes)
        if decision.perf_class is not None:
            check_class(decision.perf_class)
        row = DecisionRow(
            job_id=decision.job_id,
            kind=DecisionKind(decision.kind).value,
            reason=decision.reason,
            nodes=nodes,
            ranking_version=decision.ranking_version,
            perf_class=decision.perf_class,
            created_at=as_utc(decision.created_at),
        )
        self._write(lambda session: session.add(row))

    def decisions(self, job_id: str | None = None, limit: int = 100, *, since: datetime | None = None,
                  reason_prefix: str | None = None) -> list[DecisionRecord]:
        query = select(DecisionRow).order_by(DecisionRow.created_at.desc(), DecisionRow.id.desc())
        if job_id is not None:
            query = query.where(DecisionRow.job_id == job_id)
        if since is not None:
            query = query.where(DecisionRow.created_at >= as_utc(since))
        if reason_prefix is not None:
            query = query.where(DecisionRow.reason.startswith(reason_prefix, autoescape=True))
        with self._read() as session:
            return [
                DecisionRecord(
                    job_id=r.job_id,
                    kind=DecisionKind(r.kind),
                    reason=r.reason,
                    nodes={n: tuple(s) for n, s in (r.nodes or {}).items()},
                    ranking_version=r.ranking_version,
                    perf_class=r.perf_class,
                    created_at=r.created_at,
                )
                for r in session.scalars(query.limit(limit))
            ]

    # ---- held jobs ------------------------------------------------------------------
    def add_held_job(self, job: HeldJob) -> None:
        check_held(job)
        state = HeldState(job.state).value

        def work(session: Session) -> None:
            row = session.get(HeldJobRow, job.job_id)
            if row is None:
                row = HeldJobRow(job_id=job.job_id)
                session.add(row)
            row.perf_class = job.perf_class
            row.gpus = job.gpus
            row.submitted_at = as_utc(job.submitted_at)
            row.released_at = None if job.released_at is None else as_utc(job.released_at)
            row.state = state

        self._write(work)

    def held_jobs(self, state: HeldState | None = HeldState.HELD) -> list[HeldJob]:
        query = select(HeldJobRow).order_by(HeldJobRow.submitted_at, HeldJobRow.job_id)
        if state is not None:
            query = query.where(HeldJobRow.state == HeldState(state).value)
        with self._read() as session:
            return [
                HeldJob(
                    job_id=r.job_id,
                    perf_class=r.perf_class,
                    gpus=r.gpus,
                    submitted_at=r.submitted_at,
                    released_at=r.released_at,
                    state=HeldState(r.state),
                )
                for r in session.scalars(query)
            ]

    def mark_released(
        self, job_id: str, at: datetime | None = None, state: HeldState = HeldState.RELEASED
    ) -> bool:
        state = HeldState(state)
        if state == HeldState.HELD:
            raise InvalidRecord("mark_released needs a final state, not 'held'")
        when = as_utc(at or utcnow())

        def work(session: Session) -> bool:
            row = session.get(HeldJobRow, job_id, with_for_update=True)
            if row is None or row.state != HeldState.HELD.value:
                return False
            row.state = state.value
            row.released_at = when
            return True

        return self._write(work)

    # ---- switches -------------------------------------------------------------------
    def switches(self) -> dict[str, Switch]:
        with self._read() as session:
            rows = session.scalars(select(SwitchRow)).all()
            return {r.name: Switch(r.name, r.value, r.changed_at, r.changed_by) for r in rows}

    def set_switch(self, switch: Switch) -> None:
        check_switch(switch)

        def work(session: Session) -> None:
            row = session.get(SwitchRow, switch.name)
            if row is None:
                row = SwitchRow(name=switch.name)
                session.add(row)
            row.value = switch.value
            row.changed_at = as_utc(switch.changed_at)
            row.changed_by = switch.changed_by

        self._write(work)

    # ---- heartbeat ------------------------------------------------------------------
    def write_heartbeat(self, beat: Heartbeat) -> None:
        check_name(beat.name, "heartbeat name")
        check_name(beat.holder, "heartbeat holder")
        details = check_json(beat.details, "details")

        def work(session: Session) -> None:
            row = session.get(HeartbeatRow, beat.name)
            if row is None:
                row = HeartbeatRow(name=beat.name)
                session.add(row)
            row.holder = beat.holder
            row.beat_at = as_utc(beat.beat_at)
            row.details = details

        self._write(work)

    def read_heartbeat(self, name: str) -> Heartbeat | None:
        with self._read() as session:
            row = session.get(HeartbeatRow, name)
            if row is None:
                return None
            return Heartbeat(row.name, row.holder, row.beat_at, dict(row.details or {}))

    # ---- housekeeping -----------------------------------------------------------------
    def prune(self, before: datetime, *, keep_samples: int = 0, max_rows: int | None = None) -> dict[str, int]:
        before = as_utc(before)

        def victims(query: Select[Any]) -> Select[Any]:
            return query.limit(max_rows) if max_rows is not None else query

        def gone(session: Session, model: type[Base], ids: ColumnElement[bool]) -> int:
            stmt = delete(model).where(ids).execution_options(synchronize_session=False)
            return _rows_affected(session.execute(stmt))

        def work(session: Session) -> dict[str, int]:
            old = [SampleRow.taken_at < before]
            if keep_samples > 0:
                ranked = select(
                    SampleRow.id.label("id"),
                    func.row_number().over(
                        partition_by=(SampleRow.gpu_id, SampleRow.perf_class),
                        order_by=(SampleRow.taken_at.desc(), SampleRow.id.desc()),
                    ).label("n"),
                ).subquery()
                old.append(SampleRow.id.not_in(select(ranked.c.id).where(ranked.c.n <= keep_samples)))
            samples = victims(select(SampleRow.id).where(*old).order_by(SampleRow.taken_at, SampleRow.id))
            decisions = victims(select(DecisionRow.id).where(DecisionRow.created_at < before)
                                .order_by(DecisionRow.created_at, DecisionRow.id))
            held = victims(select(HeldJobRow.job_id).where(
                HeldJobRow.state != HeldState.HELD.value,
                HeldJobRow.released_at.is_not(None),
                HeldJobRow.released_at < before,
            ).order_by(HeldJobRow.released_at, HeldJobRow.job_id))
            return {
                "samples": gone(session, SampleRow, SampleRow.id.in_(samples.scalar_subquery())),
                "decisions": gone(session, DecisionRow, DecisionRow.id.in_(decisions.scalar_subquery())),
                "held_jobs": gone(session, HeldJobRow, HeldJobRow.job_id.in_(held.scalar_subquery())),
            }

        return self._write(work)

    def close(self) -> None:
        self.engine.dispose()


def _rows_affected(result: Result[Any]) -> int:
    """Rows a DELETE changed: its result is a CursorResult (execute() is typed as the general Result)."""
    assert isinstance(result, CursorResult)
    return result.rowcount
