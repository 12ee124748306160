"""The site's say over what users declare: which class and network sensitivity a job gets
(rules by account, partition or job-name glob, the syntax of model/class_rules.py), whether a
user's own `class=` / `net=` may override them, and who may use `mode=now` (which places a job
ahead of older held PAL jobs). pald applies them to a submission (daemon/requests.py) and to a
held job each cycle (intake.job.from_queue), so both read a job alike."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from pal_slurm.input_files import InputError
from pal_slurm.model.class_rules import ClassRule, Labelled, class_by_rules, parse_class_rules

EVERYONE = "*"


class Accounted(Labelled, Protocol):
    """What the `mode=now` list reads of a job besides its labels."""

    @property
    def qos(self) -> str | None: ...


@dataclass(frozen=True)
class NowPolicy:
    """Who may use `mode=now`: everyone ("*", the default), no one (""), or the jobs of the
    listed accounts and QOS ("account:vision, qos:high")."""

    everyone: bool = True
    accounts: frozenset[str] = frozenset()
    qos: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, text: str, where: str = "now_allowed") -> NowPolicy:
        text = text.strip()
        if text == EVERYONE:
            return cls()
        accounts: set[str] = set()
        qos: set[str] = set()
        for item in (i.strip() for i in text.split(",")):
            if not item:
                continue
            kind, sep, name = (p.strip() for p in item.partition(":"))
            if not sep or not name or kind not in ("account", "qos"):
                raise InputError(f"{where}: {item!r} is not account:NAME or qos:NAME (or '*' for everyone)")
            (accounts if kind == "account" else qos).add(name)
        return cls(False, frozenset(accounts), frozenset(qos))

    def allows(self, job: Accounted) -> bool:
        return self.everyone or (job.account or "") in self.accounts or (job.qos or "") in self.qos


@dataclass(frozen=True)
class SiteRules:
    classes: Sequence[ClassRule] = ()  # the class of a job (first match wins)
    nets: Sequence[ClassRule] = ()  # its network sensitivity (low / medium / high / a factor)
    override: bool = False  # a matching rule wins over the user's own class= / net=
    now: NowPolicy = NowPolicy()

    @classmethod
    def parse(cls, classes: str, nets: str, override: bool, now: str, where: str = "[daemon]") -> SiteRules:
        return cls(parse_class_rules(classes, f"{where} class_rules"), parse_class_rules(nets, f"{where} net_rules"),
                   override, NowPolicy.parse(now, f"{where} now_allowed"))

    def class_for(self, job: Labelled, asked: str | None) -> str | None:
        """The job's class: the user's (`asked`) unless a rule matches and overrides it, or
        none was asked; None: neither (the default class)."""
        return self._pick(self.classes, job, asked)

    def net_for(self, job: Labelled, asked: str | None) -> str | None:
        return self._pick(self.nets, job, asked)

    def _pick(self, rules: Sequence[ClassRule], job: Labelled, asked: str | None) -> str | None:
        if asked is not None and not self.override:
            return asked
        return class_by_rules(job, rules) or asked


NO_RULES = SiteRules()  # a site that set none: users' specs stand, everyone may use mode=now
