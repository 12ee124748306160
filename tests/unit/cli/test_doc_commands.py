"""Every `palctl ...` command line in README.md and docs/**/*.md (fenced code blocks and inline
code) names a command that exists and options that command takes, and parses as palctl would
parse it. Nothing is run: commands that need a cluster are only parsed."""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import click
import pytest

from pal_slurm.cli.main import cli

REPO = Path(__file__).resolve().parents[3]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
_FENCE = re.compile(r"^\s*(```|~~~)")
_INLINE = re.compile(r"`([^`\n]+)`")
_START = re.compile(r"(?:^|[\s;&|($])palctl\s+(?=\S)")
# in a code block palctl is run only at a line's start or after a shell operator (not in a diagram)
_FENCED_START = re.compile(r"(?:^\s*(?:\$\s+|sudo\s+)?|(?:&&|\|\||;|\||\$\()\s*)palctl\s+(?=\S)")
_INDENTED = re.compile(r"^ {4,}(?:\$\s+)?palctl\s")
_ARROW = re.compile(r"^-*>$|^<-*$")
_SHELL_END = {"&&", "||", "|", ";", ">", ">>", "2>", "2>&1", "<", ")"}
_PLACEHOLDER = re.compile(r"^(\.\.\.|…)$")


def _code_texts(path: Path):
    """(line number, text, in a code block) of each code block line (fenced, or an indented
    `palctl` line; continuations joined) and of each inline code span (one broken over lines
    too)."""
    in_fence, pending, start, carry = False, "", 0, ""
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        indented = not in_fence and _INDENTED.match(line) is not None  # a 4-space code block's command
        if in_fence or indented or pending:
            if line.rstrip().endswith("\\"):
                pending, start = pending + line.rstrip()[:-1] + " ", start or n
                continue
            yield (start or n), (pending + line).split(" #", 1)[0] if not line.lstrip().startswith("#") else "", True
            pending, start = "", 0
        else:
            text = carry + line
            for m in _INLINE.finditer(text):
                yield n, m.group(1), False
            # an inline span broken over lines is read whole, from its start to its closing backtick
            carry = text[text.rindex("`"):] + " " if text.count("`") % 2 else ""


def _command_lines(text: str, fenced: bool):
    for m in (_FENCED_START if fenced else _START).finditer(text):
        rest = re.sub(r"<[^>]*>", "X", text[m.end():])  # a <placeholder> is one value
        try:
            tokens = shlex.split(rest, comments=False, posix=True)
        except ValueError:
            tokens = rest.split()
        args = []
        for tok in tokens:
            if tok in _SHELL_END or tok.startswith((">", "2>", "|", "#")) or _ARROW.match(tok):
                break
            if tok.startswith("["):  # a synopsis's [--option VALUE]
                tok = tok[1:]
            if tok.endswith("]") and tok.count("]") > tok.count("["):
                tok = tok[:-1]
            if tok:
                args.append(tok)
        yield args


def doc_commands():
    found = []
    for path in DOCS:
        for n, text, fenced in _code_texts(path):
            for args in _command_lines(text, fenced):
                found.append(pytest.param(args, id=f"{path.relative_to(REPO)}:{n}:{' '.join(args)[:60]}"))
    return found


def check(args: list[str]) -> None:
    """Raise AssertionError naming what does not exist; click's own errors for what cannot parse."""
    args = [a for a in args if not _PLACEHOLDER.match(a)]
    command: click.Command = cli
    path = ["palctl"]
    while args and isinstance(command, click.Group):
        head = args[0]
        if head.startswith("-"):
            name = head.split("=", 1)[0]
            assert name in _opts(command), f"{' '.join(path)} has no option {name}"
            takes_value = any(name in p.opts and not p.is_flag for p in command.params if isinstance(p, click.Option))
            args = args[2:] if takes_value and "=" not in head else args[1:]
            continue
        if "|" in head:  # a synopsis's `classes list|add|remove`
            for alternative in head.split("|"):
                assert command.get_command(click.Context(command), alternative), \
                    f"{' '.join(path)} has no command {alternative!r}"
            return
        sub = command.get_command(click.Context(command), head)
        assert sub is not None, f"{' '.join(path)} has no command {head!r}"
        command, path, args = sub, [*path, head], args[1:]
    if isinstance(command, click.Group):
        return  # `palctl classes` names the group
    for arg in args:
        if arg.startswith("--"):
            name = arg.split("=", 1)[0]
            assert name in _opts(command), f"{' '.join(path)} has no option {name}"
    ctx = command.make_context(path[-1], list(args), resilient_parsing=True)
    takes_extra = any(isinstance(p, click.Argument) and p.nargs == -1 for p in command.params)
    assert takes_extra or not ctx.args, f"{' '.join(path)}: unexpected argument(s) {ctx.args}"


def _opts(command: click.Command) -> set[str]:
    return {o for p in command.params for o in (*p.opts, *p.secondary_opts)} | {"--help", "-h"}


@pytest.mark.parametrize("args", doc_commands())
def test_documented_command_exists(args):
    check(args)


def test_the_check_catches_what_it_must():
    assert len(doc_commands()) > 20
    for bad in (["profile-nodes", "--all"], ["nope"], ["simulate", "--baseline", "pal"],
                ["replay", "--trace", "w", "--json", "r.json"], ["whatif", "--accounting", "a", "--plot", "x.png"]):
        with pytest.raises((AssertionError, click.UsageError)):
            check(bad)
    check(["--config", "pal.toml", "simulate", "--trace", "workload-1", "--json", "--output", "r.json"])


def command_path(args: list[str]) -> tuple[str, ...]:
    """The subcommands a documented command line names (`palctl --config F db prune --yes` ->
    ("db", "prune")); a synopsis's `a|b` names each alternative's first."""
    command: click.Command = cli
    path: list[str] = []
    args = [a for a in args if not _PLACEHOLDER.match(a)]
    while args and isinstance(command, click.Group):
        head = args[0]
        if head.startswith("-"):
            takes_value = any(head in p.opts and not p.is_flag for p in command.params if isinstance(p, click.Option))
            args = args[2:] if takes_value and "=" not in head else args[1:]
            continue
        head = head.split("|", 1)[0]
        sub = command.get_command(click.Context(command), head)
        if sub is None:
            break
        command, path, args = sub, [*path, head], args[1:]
    return tuple(path)


def _string_runs(tree: ast.AST):
    """The string constants of each list, tuple and call in a test module, in order, options
    left out: `invoke(cli, ["--config", str(cfg), "db", "prune"])` gives ("db", "prune");
    a shell line's `palctl db prune` gives the same."""
    for node in ast.walk(tree):
        items = node.elts if isinstance(node, (ast.List, ast.Tuple)) else node.args if isinstance(node, ast.Call) else None
        if items is not None:
            yield tuple(i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)
                        and not i.value.startswith("-"))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "palctl " in node.value:
            for line in node.value.split("palctl ")[1:]:
                yield tuple(w for w in line.split() if not w.startswith("-"))


def _runs_in_tests() -> set[tuple[str, ...]]:
    runs: set[tuple[str, ...]] = set()
    for path in (REPO / "tests").rglob("test_*.py"):
        if path.name == Path(__file__).name:
            continue
        for run in _string_runs(ast.parse(path.read_text(encoding="utf-8"))):
            runs.update(run[i:i + k] for i in range(len(run)) for k in (1, 2))
    return runs


def test_every_documented_command_is_run_by_a_test():
    """Each command the docs tell a user or admin to run is invoked by some test (through
    click's runner or as a process), not only parsed here."""
    runs = _runs_in_tests()
    documented = {command_path(p.values[0]) for p in doc_commands()} - {()}
    not_run = sorted(" ".join(path) for path in documented if path not in runs)
    assert not_run == [], f"documented commands no test runs: {not_run}"
    assert ("db", "prune") in documented and ("trial", "report") in runs


_REPO_SCRIPT = re.compile(r"(?<![/\w])((?:benchmarks|scripts)/[\w./-]+\.(?:py|sh))")


def test_every_script_the_docs_name_exists():
    """`python3 benchmarks/x.py`, `bash scripts/y.sh`: each benchmark or script a page tells
    someone to run is in the repository."""
    named = {(path.relative_to(REPO), m.group(1)) for path in DOCS
             for m in _REPO_SCRIPT.finditer(path.read_text(encoding="utf-8"))}
    assert len(named) > 10
    missing = sorted(f"{page}: {script}" for page, script in named if not (REPO / script).is_file())
    assert missing == []
