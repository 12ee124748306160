"""pal_slurm.config: defaults, TOML file, environment overrides, and errors naming the key."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from pal_slurm.config import (
    Config,
    ConfigError,
    SECTIONS,
    load_config,
)

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "etc" / "pal.toml.example"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pal.toml"
    path.write_text(text)
    return path


def test_defaults_when_no_file_and_no_env(monkeypatch):
    monkeypatch.setattr("pal_slurm.config.DEFAULT_CONFIG_PATH", "/nonexistent/pal.toml")
    cfg = load_config(env={})
    assert cfg.source is None
    assert cfg.store.url == "sqlite:////var/lib/pal/pal.db"
    assert cfg.daemon.socket == "/run/pal/pald.sock"
    assert cfg.daemon.cycle_s == 1.0
    assert cfg.daemon.hook_timeout_ms == 150
    assert cfg.daemon.slurm_user == "slurm"
    assert cfg.daemon.heartbeat_stale_s == 30.0
    assert cfg.policy.placement == "pal-fit"
    assert cfg.policy.queue == "fifo"
    assert cfg.policy.locality_penalty == 1.7
    assert cfg.policy.default_class == "A"
    assert cfg.policy.binning == "optimal"
    assert cfg.profiling.backend == "auto"
    assert cfg.profiling.timeout_s == 5.0
    assert cfg.profiling.spool_dir == "/var/spool/pal"
    assert cfg.slurm.conf is None and cfg.slurm.bin_dir is None


def test_file_values_are_read_and_typed(tmp_path):
    path = write(
        tmp_path,
        """
[store]
url = "postgresql+psycopg2://pal@db/pal"
[daemon]
cycle_s = 2          # an integer where a float is wanted is fine
hook_timeout_ms = 90
[policy]
queue = "las"
default_class = "C"
[slurm]
conf = "/etc/slurm-lab/slurm.conf"
""",
    )
    cfg = load_config(path, env={})
    assert cfg.source == str(path)
    assert cfg.store.url == "postgresql+psycopg2://pal@db/pal"
    assert cfg.daemon.cycle_s == 2.0 and isinstance(cfg.daemon.cycle_s, float)
    assert cfg.daemon.hook_timeout_ms == 90
    assert cfg.policy.queue == "las"
    assert cfg.policy.default_class == "C"
    assert cfg.policy.placement == "pal-fit"  # untouched keys keep defaults
    assert cfg.slurm.conf == "/etc/slurm-lab/slurm.conf"


def test_config_is_frozen():
    cfg = Config()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.daemon.cycle_s = 3.0  # type: ignore[misc]


def test_pal_config_env_names_the_file(tmp_path):
    path = write(tmp_path, '[policy]\nplacement = "pmfirst"\n')
    cfg = load_config(env={"PAL_CONFIG": str(path)})
    assert cfg.policy.placement == "pmfirst"
    assert cfg.source == str(path)


def test_env_overrides_beat_the_file(tmp_path):
    path = write(tmp_path, '[store]\nurl = "sqlite:////a.db"\n[daemon]\ncycle_s = 2.0\n')
    cfg = load_config(
        path,
        env={
            "PAL_DB_URL": "sqlite:////b.db",
            "PAL_SOCKET": "/tmp/x.sock",
            "PAL_DAEMON_CYCLE_S": "0.25",
            "PAL_DAEMON_HOOK_TIMEOUT_MS": "100",
            "PAL_SLURM_BIN_DIR": "/opt/slurm/bin",
        },
    )
    assert cfg.store.url == "sqlite:////b.db"
    assert cfg.daemon.socket == "/tmp/x.sock"
    assert cfg.daemon.cycle_s == 0.25
    assert cfg.daemon.hook_timeout_ms == 100
    assert cfg.slurm.bin_dir == "/opt/slurm/bin"


def test_unknown_key_names_key_section_and_file(tmp_path):
    path = write(tmp_path, "[daemon]\ncycle = 1.0\n")
    with pytest.raises(ConfigError) as err:
        load_config(path, env={})
    msg = str(err.value)
    assert "'cycle'" in msg and "[daemon]" in msg and str(path) in msg
    assert "cycle_s" in msg  # lists the known keys


def test_unknown_section(tmp_path):
    path = write(tmp_path, "[deamon]\ncycle_s = 1.0\n")
    with pytest.raises(ConfigError, match=r"unknown section \[deamon\]"):
        load_config(path, env={})


@pytest.mark.parametrize(
    "body, fragment",
    [
        ('[daemon]\ncycle_s = "fast"\n', r"\[daemon\] cycle_s: expected a number"),
        ("[daemon]\nhook_timeout_ms = 1.5\n", r"hook_timeout_ms: expected an integer"),
        ("[daemon]\nhook_timeout_ms = true\n", r"hook_timeout_ms: expected an integer"),
        ("[store]\nurl = 3\n", r"\[store\] url: expected a string"),
        ('[policy]\nqueue = "lifo"\n', r"queue: 'lifo' is not one of fifo, las, srtf"),
        ('[policy]\ndefault_class = "E"\n', r"default_class: 'E' is not one of A, B, C, D"),
        ('[policy]\nbinning = "kmeans"\n', r"binning: 'kmeans' is not one of"),
        ('[profiling]\nbackend = "cuda"\n', r"backend: 'cuda' is not one of"),
        ("[daemon]\ncycle_s = 0\n", r"cycle_s: must be greater than 0"),
        ("[policy]\nreserve_after_s = -1\n", r"reserve_after_s: must be 0 or more"),
        ("[policy]\nrack_wait_s = -5.0\n", r"rack_wait_s: must be 0 or more"),
        ("[profiling]\nprolog_every_h = -1\n", r"prolog_every_h: must be 0 or more"),
        ("[profiling]\nprolog_max_delay_s = 0\n", r"prolog_max_delay_s: must be greater than 0"),
        ('[profiling]\nprolog_pal_only = "yes"\n', r"prolog_pal_only: expected a boolean"),
        ('[daemon]\nsocket = ""\n', r"socket: must not be empty"),
        ('daemon = "x"\n', r"\[daemon\] must be a table"),
    ],
)
def test_bad_values_are_rejected_with_the_key(tmp_path, body, fragment):
    path = write(tmp_path, body)
    with pytest.raises(ConfigError, match=fragment) as err:
        load_config(path, env={})
    assert str(path) in str(err.value)


def test_bad_env_value_names_the_variable():
    with pytest.raises(ConfigError, match=r"PAL_DAEMON_CYCLE_S .*expected a number, got 'soon'"):
        load_config("/dev/null", env={"PAL_DAEMON_CYCLE_S": "soon"})
    with pytest.raises(ConfigError, match=r"PAL_POLICY_QUEUE.*not one of"):
        load_config("/dev/null", env={"PAL_POLICY_QUEUE": "random"})


def test_invalid_toml_and_missing_named_file(tmp_path):
    path = write(tmp_path, "[daemon\ncycle_s = 1\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(path, env={})
    with pytest.raises(ConfigError, match="configuration file not found"):
        load_config(tmp_path / "absent.toml", env={})
    with pytest.raises(ConfigError, match="configuration file not found"):
        load_config(env={"PAL_CONFIG": str(tmp_path / "absent.toml")})


def test_example_file_parses_to_the_defaults_but_a_fresh_install_in_shadow():
    """The example is what an install copies: PAL starts in shadow there (docs/install.md); with
    no file at all (labs, tests, tools) every partition is on."""
    cfg = load_config(EXAMPLE, env={})
    assert cfg.daemon.mode == "shadow"
    assert dataclasses.replace(cfg, source=None, daemon=dataclasses.replace(cfg.daemon, mode="on")) == Config()


def test_example_documents_every_key():
    text = EXAMPLE.read_text()
    for section, cls in SECTIONS.items():
        assert f"[{section}]" in text
        body = text.split(f"[{section}]", 1)[1].split("\n[", 1)[0]
        for f in dataclasses.fields(cls):
            # a key line, active or commented out, inside its section
            assert re.search(rf"^#? ?{f.name} = ", body, re.M), f"{section}.{f.name} undocumented"


def test_replay_cluster_is_checked_and_read(tmp_path):
    from pal_slurm.config import parse_replay_cluster

    cfg = load_config(write(tmp_path, '[profiling]\nreplay_cluster = "gpu[01-03]x4"\n'), env={})
    assert parse_replay_cluster(cfg.profiling.replay_cluster) == (("gpu01", "gpu02", "gpu03"), 4)
    assert parse_replay_cluster("") is None
    with pytest.raises(ConfigError, match="expected NODELISTxGPUS"):
        load_config(write(tmp_path, '[profiling]\nreplay_cluster = "gpu[01-03]"\n'), env={})


def test_placement_and_queue_choices_come_from_the_registry(tmp_path):
    from pal_slurm.policy import PLACEMENTS

    for name in sorted(PLACEMENTS):  # every registered placement is configurable (pal-net, dally, ...)
        assert load_config(write(tmp_path, f'[policy]\nplacement = "{name}"\n')).policy.placement == name
    with pytest.raises(ConfigError, match="pal-net"):  # the message lists the registered ones
        load_config(write(tmp_path, '[policy]\nplacement = "best-effort"\n'))
    with pytest.raises(ConfigError, match="srtf"):
        load_config(write(tmp_path, '[policy]\nqueue = "lifo"\n'))


def test_binning_and_backend_choices_come_from_their_registries(tmp_path):
    from pal_slurm.bench.base import BACKENDS
    from pal_slurm.ranking.binning import METHODS

    for method in METHODS:
        assert load_config(write(tmp_path, f'[policy]\nbinning = "{method}"\n')).policy.binning == method
    for backend in BACKENDS:
        assert load_config(write(tmp_path, f'[profiling]\nbackend = "{backend}"\n')).profiling.backend == backend
    with pytest.raises(ConfigError, match="artifact, optimal"):  # the message lists the registered ones
        load_config(write(tmp_path, '[policy]\nbinning = "kmeans"\n'))


def test_without_registries_the_names_of_registry_entries_are_not_checked(tmp_path):
    """The prolog's due check reads the file this way: checking those names imports the
    policies (and numpy) on every job start. Every other check still applies."""
    path = write(tmp_path, '[policy]\nplacement = "best-effort"\n[profiling]\nbackend = "cuda"\nprolog_every_h = 6\n')
    cfg = load_config(path, env={"PAL_POLICY_QUEUE": "lifo"}, registries=False)
    assert (cfg.policy.placement, cfg.policy.queue, cfg.profiling.backend) == ("best-effort", "lifo", "cuda")
    assert cfg.profiling.prolog_every_h == 6.0
    with pytest.raises(ConfigError, match="placement"):
        load_config(path, env={})
    with pytest.raises(ConfigError, match="prolog_every_h"):
        load_config(write(tmp_path, "[profiling]\nprolog_every_h = -2\n"), env={}, registries=False)


def test_samples_through_pald_needs_pald_address(tmp_path):
    with pytest.raises(ConfigError, match=r"\[samples\] pald"):
        load_config(write(tmp_path, '[samples]\nsend = "pald"\n'), env={})
    cfg = load_config(write(tmp_path, '[samples]\nsend = "pald"\npald = "ctl:6830"\n'), env={})
    assert (cfg.samples.send, cfg.samples.pald) == ("pald", "ctl:6830")
    with pytest.raises(ConfigError, match="not one of store, pald"):
        load_config(write(tmp_path, '[samples]\nsend = "http"\n'), env={})
    with pytest.raises(ConfigError, match="host:port"):
        load_config(write(tmp_path, '[samples]\nlisten = "6830"\n'), env={})
