"""The `--comment` job-spec grammar: the one parser of `pal:class=...` specs in Python.

Every reader of a job's spec uses it: pald (which re-checks what the hook parsed, defence in
depth: a buggy or old hook cannot feed it a spec the grammar does not allow), the accounting
import (`sim.sacct`, a job's class from its comment) and so the simulator. The submit hook
(`job_submit_lua/pal.lua`) parses a comment first, in Lua: it must know whether a job is a PAL
job before it opens a socket. Both parsers are driven by the same table of cases,
`tests/golden/comment_grammar.json`; change the grammar there first.

Grammar (one whitespace-delimited token of the comment; other text around it is kept as is):

    pal:class=<name>[,gpus=<n>][,mode=now|defer][,net=<sensitivity>]

- The token starts with `pal:` at the start of the comment or after ASCII whitespace
  (space, tab, CR, LF, FF, VT) and runs to the next ASCII whitespace. `PAL:` and `xpal:` are
  not ours. At most one such token.
- Comma-separated `key=value` pairs, any order, each key at most once; `class` is required.
- `<name>` and `<sensitivity>`: 1-64 characters of `A-Z a-z 0-9 _ . -`. Whether the class is
  known is pald's business (unknown -> default class plus a warning), not the grammar's; so is
  what a sensitivity means (a class name or a spread factor such as `2.2`: model.network).
- `<n>`: 1..999999, decimal, no sign, no leading zero.
- Pairs are checked left to right; the first error wins, then a missing class is reported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

GRAMMAR = "pal:class=<name>[,gpus=<n>][,mode=now|defer][,net=<sensitivity>]"
KEYS = ("class", "gpus", "mode", "net")
MODES = ("now", "defer")
OPT_OUT = "off"  # `pal:off`
# The class of a place request's spec for a job of a default-on partition: it has no
# `pal:class=` (the hook sends an empty `pal` object) and pald's class rules give it one.
DEFAULT_ON_CLASS = ""

_WS = " \t\r\n\f\v"
_SPEC_RE = re.compile(r"(?:^|(?<=[" + re.escape(_WS) + r"]))pal:([^" + re.escape(_WS) + r"]*)")
_NAME_RE = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
_GPUS_RE = re.compile(r"[1-9][0-9]{0,5}")


class CommentError(ValueError):
    """A comment that holds a `pal:` spec the grammar rejects. `code` matches the Lua side."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True)
class CommentSpec:
    """The parsed `pal:` spec of a job's comment."""

    perf_class: str  # `class=`: application class name as the user wrote it
    gpus: int | None = None  # `gpus=`: GPU count the user asks PAL to place (None: from Slurm's request)
    mode: str | None = None  # `mode=`: "now" or "defer" (None: pald's default)
    net: str | None = None  # `net=`: network sensitivity name (None: pald's default)

    def to_wire(self) -> dict[str, str | int]:
        """The JSON object form used in the protocol and in the golden file (absent = not given)."""
        out: dict[str, str | int] = {} if self.perf_class == DEFAULT_ON_CLASS else {"class": self.perf_class}
        for key, value in (("gpus", self.gpus), ("mode", self.mode), ("net", self.net)):
            if value is not None:
                out[key] = value
        return out


def parse_comment(comment: str | None) -> CommentSpec | None:
    """Parse a job comment: None when it holds no `pal:` spec, else the spec or CommentError."""
    if not comment:
        return None
    tokens = [m.group(1) for m in _SPEC_RE.finditer(comment)]
    if not tokens:
        return None
    if len(tokens) > 1:
        raise CommentError("multiple_specs", f"{len(tokens)} pal: specs in the comment; give one")
    token = tokens[0]
    if token == OPT_OUT:  # not a spec: the user's `pal:off` (opted_out)
        return None
    if token == "":
        raise CommentError("empty", "pal: is followed by nothing; expected class=<name>")
    fields: dict[str, object] = {}
    for pair in token.split(","):
        key, sep, value = pair.partition("=")
        if not sep or key == "":
            raise CommentError("bad_pair", f"'{pair}' is not key=value")
        if key not in KEYS:
            raise CommentError("unknown_key", f"unknown key '{key}' (allowed: {', '.join(KEYS)})")
        if key in fields:
            raise CommentError("duplicate_key", f"key '{key}' given more than once")
        if value == "":
            raise CommentError("empty_value", f"empty value for '{key}'")
        if key == "gpus":
            if not _GPUS_RE.fullmatch(value):
                raise CommentError("bad_gpus", f"gpus='{value}' is not a whole number 1..999999")
            fields[key] = int(value)
        elif key == "mode":
            if value not in MODES:
                raise CommentError("bad_mode", f"mode='{value}' must be now or defer")
            fields[key] = value
        else:
            if not _NAME_RE.fullmatch(value):
                raise CommentError(
                    "bad_name", f"{key}='{value}' must be 1-64 characters of A-Z a-z 0-9 _ . -"
                )
            fields[key] = value
    if "class" not in fields:
        raise CommentError("missing_class", "class=<name> is required")
    return CommentSpec(
        perf_class=fields["class"],  # type: ignore[arg-type]
        gpus=fields.get("gpus"),  # type: ignore[arg-type]
        mode=fields.get("mode"),  # type: ignore[arg-type]
        net=fields.get("net"),  # type: ignore[arg-type]
    )


def opted_out(comment: str | None) -> bool:
    """`pal:off` alone: the user opts out of a partition where every GPU job is PAL's."""
    return bool(comment) and [m.group(1) for m in _SPEC_RE.finditer(comment or "")] == [OPT_OUT]


def verify_spec(comment: str, sent: CommentSpec) -> CommentSpec:
    """pald's check of a place request: the hook's parse must equal ours of the raw comment.

    Raises CommentError("mismatch", ...) when the hook sent fields the raw comment does not
    say, and the grammar's own CommentError when the raw comment is malformed.
    """
    ours = parse_comment(comment)
    if ours is None:
        raise CommentError("mismatch", "the raw comment holds no pal: spec")
    if ours != sent:
        raise CommentError("mismatch", f"hook parsed {sent.to_wire()}, comment says {ours.to_wire()}")
    return ours
