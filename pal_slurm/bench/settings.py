"""Profiling settings: the `[profiling]` table of pal.toml, with env overrides.

TODO(config): when pal_slurm/config.py lands in main, read these from its typed config and
keep this module as the adapter. Until then it reads the TOML file itself (tomllib, stdlib).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Mapping

DEFAULT_CONFIG = "/etc/pal/pal.toml"


class SettingsError(ValueError):
    """A bad profiling setting (message names the key)."""


@dataclass(frozen=True)
class ProfilingSettings:
    backend: str = "auto"  # auto | kernel | nvml | replay
    timeout_s: float = 5.0  # prolog/epilog hard deadline
    duration_s: float = 2.0  # measurement time per call (all GPUs of the job)
    spool_dir: str = "/var/spool/pal"  # samples queued here when the store is unreachable
    state_dir: str = "/var/lib/pal"  # file repository used until the store is configured
    store_url: str = ""  # database URL of the store ('' = file repository in state_dir)
    default_class: str = "A"  # class for jobs without pal:class= (the most sensitive)
    replay_seed: int = 0
    window_s: float = 7 * 86400.0  # ranking window
    method: str = "optimal"  # binning method
    max_load_per_cpu: float = 0.8

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> "ProfilingSettings":
        known = {f.name: f for f in fields(cls)}
        kwargs = {}
        for key, value in data.items():
            if key not in known:
                raise SettingsError(f"profiling.{key}: unknown setting")
            typ = type(getattr(cls(), key))
            try:
                kwargs[key] = typ(value)
            except (TypeError, ValueError):
                raise SettingsError(f"profiling.{key}: expected {typ.__name__}, got {value!r}") from None
        out = cls(**kwargs)
        if out.timeout_s <= 0 or out.duration_s < 0:
            raise SettingsError("profiling.timeout_s must be > 0 and duration_s >= 0")
        return out

    def with_env(self, env: Mapping[str, str]) -> "ProfilingSettings":
        """PAL_PROFILING_<KEY> overrides (e.g. PAL_PROFILING_SPOOL_DIR)."""
        data = {}
        for f in fields(self):
            raw = env.get(f"PAL_PROFILING_{f.name.upper()}")
            if raw is not None:
                data[f.name] = raw
        if not data:
            return self
        merged = {f.name: getattr(self, f.name) for f in fields(self)}
        merged.update(data)
        return ProfilingSettings.from_mapping(merged)


def load_settings(path: str | None = None, env: Mapping[str, str] | None = None) -> ProfilingSettings:
    """Read [profiling] from `path` (or PAL_CONFIG, or /etc/pal/pal.toml when it exists)."""
    env = os.environ if env is None else env
    path = path or env.get("PAL_CONFIG") or DEFAULT_CONFIG
    data: Mapping[str, Any] = {}
    p = Path(path)
    if p.exists():
        try:
            data = tomllib.loads(p.read_text()).get("profiling", {})
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise SettingsError(f"{path}: {exc}") from None
    return ProfilingSettings.from_mapping(data).with_env(env)


__all__ = ["ProfilingSettings", "SettingsError", "load_settings", "replace"]
