"""A job's --constraint as pald reads it: feature names joined by `&` or `|`, grouped with
`( )` or `[ ]`. Pure.

Why only these: pald pins a job to nodes, so it must judge each node as Slurm would; what it
cannot evaluate exactly (counts, `,`, `!`, mixed operators without parentheses) is refused
here and the job passes to Slurm untouched (see policy/eligibility.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable


class ConstraintUnsupported(ValueError):
    """A constraint pald does not evaluate exactly (counts, mixed operators, ...)."""


class ConstraintTooLarge(ConstraintUnsupported):
    """A constraint over MAX_CONSTRAINT_CHARS or nested deeper than MAX_CONSTRAINT_DEPTH."""


MAX_CONSTRAINT_CHARS = 4096  # a --constraint text; Slurm's feature names are short
MAX_CONSTRAINT_DEPTH = 16  # nested ( ) / [ ] groups

_TOKEN = re.compile(r"\s*(?:([&|()\[\]])|([^&|()\[\]*,!\s]+)|(\S))")


@dataclass(frozen=True)
class Constraint:
    """A parsed --constraint: `matches(features)` for one node; `matching_or` when it holds
    `[...]` (every node of the job must match the same alternative)."""

    matches: Callable[[frozenset[str]], bool]
    matching_or: bool


def parse_constraint(text: str) -> Constraint:
    """Feature names joined by `&` or `|`, grouped with `( )` or `[ ]`.

    Mixing `&` and `|` at one level without parentheses is refused (Slurm's precedence there
    is not documented, so pald does not guess); so are counts (`*N`), `,` and `!`, and a text
    over MAX_CONSTRAINT_CHARS or nested deeper than MAX_CONSTRAINT_DEPTH (checked as it is
    read, so the parser's recursion never goes deeper). Messages quote at most 40 characters.
    """
    if len(text) > MAX_CONSTRAINT_CHARS:
        raise ConstraintTooLarge(f"constraint of {len(text)} chars (at most {MAX_CONSTRAINT_CHARS})")
    quoted = repr(text if len(text) <= 40 else text[:40] + "...")
    tokens: list[tuple[str, str]] = []
    for m in _TOKEN.finditer(text):
        op, name, other = m.groups()
        if other is not None:
            raise ConstraintUnsupported(f"'{other}' in constraint {quoted}")
        tokens.append(("op", op) if op else ("name", name))
    if not tokens:
        raise ConstraintUnsupported("empty constraint")
    pos = 0
    brackets = False
    depth = 0

    def expr(closing: str | None) -> Callable[[frozenset[str]], bool]:
        nonlocal pos
        terms = [term()]
        joiner = None
        while pos < len(tokens) and tokens[pos] != ("op", closing):
            kind, value = tokens[pos]
            if kind != "op" or value not in "&|":
                raise ConstraintUnsupported(f"unexpected {value!r} in constraint {quoted}")
            if joiner is not None and value != joiner:
                raise ConstraintUnsupported(f"mixed & and | without parentheses in {quoted}")
            joiner = value
            pos += 1
            terms.append(term())
        if closing is not None:
            if pos >= len(tokens):
                raise ConstraintUnsupported(f"unclosed group in constraint {quoted}")
            pos += 1
        if joiner == "|":
            return lambda feats: any(t(feats) for t in terms)
        return lambda feats: all(t(feats) for t in terms)

    def group(closing: str) -> Callable[[frozenset[str]], bool]:
        nonlocal depth
        depth += 1
        if depth > MAX_CONSTRAINT_DEPTH:
            raise ConstraintTooLarge(f"constraint nested deeper than {MAX_CONSTRAINT_DEPTH}")
        inner = expr(closing)
        depth -= 1
        return inner

    def term() -> Callable[[frozenset[str]], bool]:
        nonlocal pos, brackets
        if pos >= len(tokens):
            raise ConstraintUnsupported(f"constraint {quoted} ends too early")
        kind, value = tokens[pos]
        pos += 1
        if kind == "name":
            return lambda feats: value in feats
        if value == "(":
            return group(")")
        if value == "[":
            brackets = True
            return group("]")
        raise ConstraintUnsupported(f"unexpected {value!r} in constraint {quoted}")

    matches = expr(None)
    if pos != len(tokens):
        raise ConstraintUnsupported(f"unbalanced constraint {quoted}")
    return Constraint(matches, brackets)
