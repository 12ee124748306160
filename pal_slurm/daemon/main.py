"""`pald`: the placement daemon's entry point (config -> wiring -> loops until a signal).

Exit codes: 0 stopped by a signal; 1 the socket could not be served (an OS error, e.g. a
`socket_group` pald's user is not in); 2 bad option or configuration (an unknown
`socket_group`); 3 another pald answers on the configured socket (`EXIT_SOCKET_IN_USE`:
this one leaves the live socket alone and stops before touching Slurm or the store).
"""

from __future__ import annotations

import argparse
import asyncio
import grp
import logging
import os
import pwd
import signal
import sys
from functools import partial
from http.server import ThreadingHTTPServer

from pal_slurm import __version__
from pal_slurm.config import Config, ConfigError, load_config
from pal_slurm.daemon.app import Pald
from pal_slurm.daemon.memory import FrozenAfterRead
from pal_slurm.daemon.requests import RELOAD_WAIT_S
from pal_slurm.daemon.lazy_store import LazyStore
from pal_slurm.daemon.server import Handler, SamplesServer, Settle, SocketInUse, SocketServer, claim_path

log = logging.getLogger("pald")

EXIT_SOCKET_IN_USE = 3


def _gid_of(group: str) -> int | None:
    """The socket's group: None for "" (mode 0600); ConfigError for an unknown group."""
    if not group:
        return None
    try:
        return grp.getgrnam(group).gr_gid
    except KeyError:
        raise ConfigError(f"[daemon] socket_group: no group {group!r} on this host") from None


def _uid_of(user: str) -> int | None:
    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        return None


def build(config: Config) -> Pald:
    """The one place where pald's parts are wired together."""
    from pal_slurm.slurm.actuator import SlurmActuator
    from pal_slurm.slurm.job_limits import read_job_limits
    from pal_slurm.slurm.priority import read_site_priority
    from pal_slurm.slurm.readers import SlurmReader
    from pal_slurm.slurm.runner import CommandRunner

    from pal_slurm.store.leader import RetryingLeader, make_leader

    runner = CommandRunner(slurm_conf=config.slurm.conf, bin_dir=config.slurm.bin_dir)
    store = LazyStore(config.store.url)
    # A set-up that fails is retried on every leadership check; until then pald is a standby
    # (it answers `place` with pass), never a second leader beside the real one.
    leader = RetryingLeader(lambda: make_leader(config.store.url))
    return Pald(config, store, SlurmReader(runner), SlurmActuator(runner), leader=leader,
                priority=partial(read_site_priority, runner), limits=partial(read_job_limits, runner),
                memory=memory_policy(config))


def memory_policy(config: Config) -> FrozenAfterRead | None:
    """How pald's collector treats each read's state (daemon.memory; `[daemon] gc_full_every_s`)."""
    every = config.daemon.gc_full_every_s
    return FrozenAfterRead(every) if every > 0 else None


def with_metrics(config: Config, pald: Pald) -> tuple[Handler, Settle, ThreadingHTTPServer | None]:
    """(request handler, settle, metrics HTTP server or None): what the socket server calls to
    answer a request and, after writing the reply, to settle it. Metrics are optional: an
    address that cannot be bound is logged and pald serves placements without them."""
    from pal_slurm.config import parse_listen

    listen = parse_listen(config.metrics.listen)
    if listen is None:
        return pald.requests.answer, pald.requests.settle, None
    from pal_slurm.daemon.metrics import PaldMetrics, Publisher, instrument, serve_metrics

    metrics = PaldMetrics()
    try:
        http = serve_metrics(metrics, *listen)
    except OSError as exc:
        log.error("metrics endpoint %s unavailable (%s): serving without metrics", config.metrics.listen, exc)
        return pald.requests.answer, pald.requests.settle, None
    publisher = Publisher(metrics, config.drift.threshold)

    def cycle_done(seconds: float) -> None:
        metrics.observe_cycle(seconds)
        publisher.publish(pald)

    pald.cycle_observers.append(cycle_done)
    counted = instrument(pald.requests.answer, pald.requests.settle, metrics)
    return counted.answer, counted.settle, http


async def start_samples(config: Config, handler: Handler) -> SamplesServer | None:
    """The samples listener when `[samples] listen` is set; an address that cannot be bound is
    logged and pald serves without it (nodes spool their samples meanwhile)."""
    from pal_slurm.config import parse_listen

    listen = parse_listen(config.samples.listen)
    if listen is None:
        return None
    server = SamplesServer(handler, *listen)
    try:
        await server.start()
    except OSError as exc:
        log.error("samples listener %s unavailable (%s): nodes' samples stay spooled", config.samples.listen, exc)
        return None
    return server


async def serve(config: Config, pald: Pald) -> None:
    claim_path(config.daemon.socket)  # before the store and leadership: a second pald stops here
    slurm_uid = _uid_of(config.daemon.slurm_user)
    allowed = {0, os.geteuid()} | ({slurm_uid} if slurm_uid is not None else set())
    handler, settle, metrics_http = with_metrics(config, pald)
    server = SocketServer(handler, config.daemon.socket, allowed, owner_uid=slurm_uid, settle=settle,
                          group_gid=_gid_of(config.daemon.socket_group))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await asyncio.to_thread(pald.start_store)
    if pald.link is not None:  # the ranking, if the store answers in time; else it comes later
        await asyncio.to_thread(pald.link.request_refresh, RELOAD_WAIT_S)
        pald.apply_store_read()
    await server.start()
    samples = await start_samples(config, handler)
    try:
        await pald.run_loops(stop)
    finally:
        if samples is not None:
            await samples.close()
        await server.close()
        if metrics_http is not None:
            metrics_http.shutdown()
        await asyncio.to_thread(pald.stop_store)
        log.info("stopped")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pald", description="pal-slurm placement daemon")
    parser.add_argument("--version", action="version", version=f"pald {__version__}")
    parser.add_argument("--config", help="pal.toml (default /etc/pal/pal.toml or $PAL_CONFIG)")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s",
                        stream=sys.stderr)
    try:
        config = load_config(args.config)
        _gid_of(config.daemon.socket_group)
    except ConfigError as exc:
        print(f"pald: {exc}", file=sys.stderr)
        return 2
    pald = build(config)
    try:
        asyncio.run(serve(config, pald))
    except SocketInUse as exc:
        print(f"pald: refusing to start: {exc}", file=sys.stderr)
        return EXIT_SOCKET_IN_USE
    except OSError as exc:
        print(f"pald: cannot serve on {config.daemon.socket}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
