"""The site's class rules: `FIELD:GLOB=CLASS; ...` with FIELD name, account or partition, first
match wins (e.g. "name:bert*=B; account:vision=A"). They give a class to a job that carries no
`pal:class=`: an accounting record for `palctl simulate` / `whatif` ([simulate] class_rules),
and a job of a default-on partition for pald ([daemon] class_rules)."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from pal_slurm.input_files import InputError

RULE_FIELDS = ("name", "account", "partition")
_RULE = re.compile(r"(\w+):(.+)=([A-Za-z0-9_.\-]{1,64})")


class Labelled(Protocol):
    """What a rule reads of a job (an accounting record, the hook's fields)."""

    @property
    def name(self) -> str | None: ...

    @property
    def account(self) -> str | None: ...

    @property
    def partition(self) -> str | None: ...


@dataclass(frozen=True)
class ClassRule:
    """`field:pattern=CLASS`: jobs whose `field` matches the glob `pattern` are of CLASS."""

    field: str  # name | account | partition
    pattern: str
    perf_class: str

    def matches(self, job: Labelled) -> bool:
        return fnmatch.fnmatchcase(getattr(job, self.field) or "", self.pattern)


def parse_class_rules(text: str, where: str = "class_rules") -> tuple[ClassRule, ...]:
    """'name:bert*=B; account:vision=A; partition:big=C' -> rules, first match wins; InputError
    naming the bad rule."""
    rules = []
    for part in (text or "").replace("\n", ";").split(";"):
        part = part.strip()
        if not part:
            continue
        m = _RULE.fullmatch(part)
        if not m or m.group(1) not in RULE_FIELDS:
            raise InputError(f"{where}: bad rule {part!r}; expected FIELD:PATTERN=CLASS with FIELD one of "
                             f"{', '.join(RULE_FIELDS)} (e.g. name:bert*=B)")
        rules.append(ClassRule(m.group(1), m.group(2).strip(), m.group(3)))
    return tuple(rules)


def class_by_rules(job: Labelled, rules: Sequence[ClassRule]) -> str | None:
    """The first matching rule's class, or None."""
    return next((r.perf_class for r in rules if r.matches(job)), None)
