"""The profiling settings bench code needs, drawn from the one typed config (pal_slurm.config).

An adapter: prolog, epilog and palctl's profiling commands see one flat, frozen value instead
of reaching into several config sections ([profiling], [samples], [store] url, [policy]
default_class and binning).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from pal_slurm.config import Config, ConfigError, load_config

SettingsError = ConfigError  # bad configuration (the message names the key and the file)


@dataclass(frozen=True)
class ProfilingSettings:
    backend: str = "auto"  # auto | kernel | nvml | replay
    timeout_s: float = 5.0  # prolog/epilog hard deadline
    duration_s: float = 2.0  # measurement time per call (all GPUs of the job)
    spool_dir: str = "/var/spool/pal"  # samples queued here when the store is unreachable
    store_url: str = "memory://"  # store URL ([store] url)
    default_class: str = "A"  # class for jobs without pal:class= ([policy] default_class)
    replay_seed: int = 0
    replay_slowdown: str = ""  # node:slot=factor,... (replay backend: emulated degraded GPUs)
    replay_cluster: str = ""  # gpu[01-16]x4: replay the event simulator's draw for that cluster
    window_s: float = 7 * 86400.0  # ranking window
    method: str = "optimal"  # binning method ([policy] binning)
    max_load_per_cpu: float = 0.8
    prolog_every_h: float = 24.0  # the prolog's budget (pal_slurm.bench.due)
    prolog_pal_only: bool = False
    prolog_max_delay_s: float = 3.0
    send: str = "store"  # store | pald ([samples] send): where the hooks deliver samples
    pald_address: str = ""  # [samples] pald: host:port of pald's samples listener
    munge_socket: str = ""  # [samples] munge_socket
    send_timeout_s: float = 2.0  # [samples] timeout_s

    @classmethod
    def from_config(cls, cfg: Config) -> "ProfilingSettings":
        p = cfg.profiling
        return cls(
            backend=p.backend,
            timeout_s=p.timeout_s,
            duration_s=p.duration_s,
            spool_dir=p.spool_dir,
            store_url=cfg.store.url,
            default_class=cfg.policy.default_class,
            replay_seed=p.replay_seed,
            replay_slowdown=p.replay_slowdown,
            replay_cluster=p.replay_cluster,
            window_s=p.window_s,
            method=cfg.policy.binning,
            max_load_per_cpu=p.max_load_per_cpu,
            prolog_every_h=p.prolog_every_h,
            prolog_pal_only=p.prolog_pal_only,
            prolog_max_delay_s=p.prolog_max_delay_s,
            send=cfg.samples.send,
            pald_address=cfg.samples.pald,
            munge_socket=cfg.samples.munge_socket,
            send_timeout_s=cfg.samples.timeout_s,
        )


def load_settings(path: str | None = None, env: Mapping[str, str] | None = None) -> ProfilingSettings:
    """Read the configuration (file, then PAL_* environment); ConfigError when it is bad."""
    return ProfilingSettings.from_config(load_config(path, env))
