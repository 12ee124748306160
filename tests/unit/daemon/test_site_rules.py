"""The site's say over what users declare, as pald applies it to a submission: rules give a
job's class and net where the user said none (or over the user's with rules_override), and a
mode=now the site does not allow is taken as mode=auto with a warning."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pal_slurm.config import Config, ConfigError, DaemonConfig, from_mapping
from pal_slurm.daemon.app import Pald
from pal_slurm.model import DecisionKind
from pal_slurm.model.site_rules import NowPolicy, SiteRules
from pal_slurm.store.memory import MemoryRepository

from .builders import FakeActuator, FakeReader, node_info, request, snapshot


def make(tmp_path, **daemon):
    store = MemoryRepository()
    store.write_ranking("optimal", snapshot({"A": {("gpu01", 0): (3.0, 3.0)}}).entries)
    cfg = Config(daemon=DaemonConfig(socket=str(tmp_path / "pald.sock"), heartbeat_file=str(tmp_path / "hb"),
                                     **daemon))
    pald = Pald(cfg, store, FakeReader([node_info(f"gpu{i:02d}") for i in range(1, 5)]), FakeActuator())
    pald.refresh_store()
    pald.sync_and_cycle()
    return pald


def named(req, name=None, account=None, qos=None):
    return replace(req, job=replace(req.job, name=name, account=account, qos=qos))


def test_rules_fill_in_and_with_override_win(tmp_path):
    rules = dict(class_rules="name:bert*=C", net_rules="name:bert*=high")
    mine = make(tmp_path, **rules)
    assert mine.handle(named(request("D", gpn=1, nodes=1, rid="a"), "bert-x")).perf_class == "D"  # the user's
    site = make(tmp_path, rules_override=True, **rules)
    assert site.handle(named(request("D", gpn=1, nodes=1, rid="b"), "bert-x")).perf_class == "C"
    assert site.handle(named(request("D", gpn=1, nodes=1, rid="c"), "other")).perf_class == "D"  # no rule


def test_mode_now_only_where_the_site_allows_it(tmp_path):
    pald = make(tmp_path, now_allowed="account:vision, qos:high")
    allowed = pald.handle(named(request("resnet", gpn=1, nodes=1, mode="now", rid="a"), account="vision"))
    by_qos = pald.handle(named(request("resnet", gpn=1, nodes=1, mode="now", rid="b"), qos="high"))
    other = pald.handle(named(request("resnet", gpn=1, nodes=1, mode="now", rid="c"), account="misc"))
    assert not (allowed.warning or "").startswith("pal: mode=now") and not (by_qos.warning or "")
    assert other.decision is DecisionKind.PLACE and "mode=now is not allowed" in (other.warning or "")
    nobody = make(tmp_path, now_allowed="")
    assert "mode=now is not allowed" in (nobody.handle(request("resnet", gpn=1, nodes=1, mode="now")).warning or "")
    assert not (make(tmp_path).handle(request("resnet", gpn=1, nodes=1, mode="now")).warning or "")


def test_now_policy_and_the_configuration_check_it():
    assert NowPolicy.parse("*").everyone and not NowPolicy.parse("").everyone
    assert NowPolicy.parse("account:a, qos:b") == NowPolicy(False, frozenset({"a"}), frozenset({"b"}))
    with pytest.raises(ConfigError, match="now_allowed"):
        from_mapping({"daemon": {"now_allowed": "user:bob"}})
    with pytest.raises(ConfigError, match="net_rules"):
        from_mapping({"daemon": {"net_rules": "name:x"}})
    assert SiteRules().class_for(object(), "resnet") == "resnet"  # type: ignore[arg-type]
