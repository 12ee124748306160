"""The elements of one array member of a large JSON object, read as they are needed.

`sacct --json` writes one object whose `jobs` array holds every job: a large site's dump is
gigabytes, and `json.loads` holds the whole text plus every parsed job at once. `array_items`
walks the object's members, decodes the members it does not want and drops them, and yields the
wanted array's elements one at a time, keeping only the text not yet decoded (read a block of
lines at a time through `input_files.read_blocks`, so UTF-8 and NUL are checked as everywhere
else; a line at a time, an indented dump's hundred lines per job were most of the time).
Errors are `InputError`s with the line and column, as `json.loads` would give them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Iterator

from pal_slurm.input_files import InputError, read_blocks

_WS = " \t\n\r"
_KEEP = 1 << 16  # decoded text dropped from the buffer once this much has piled up


class _Buffer:
    """Text not yet decoded, refilled from the file's blocks of lines, with the line/column of its start."""

    def __init__(self, blocks: Iterator[str], path: str | Path, error: type[InputError]):
        self.blocks, self.path, self.error = blocks, path, error
        self.text, self.pos = "", 0
        self.line, self.col = 1, 1  # of text[0] in the file
        self.eof = False

    def more(self, at_least: int = 1) -> bool:
        """Append `at_least` more characters (or to the end of the file); False at the end."""
        if self.eof:
            return False
        added: list[str] = []
        size = 0
        for block in self.blocks:
            added.append(block)
            size += len(block)
            if size >= at_least:
                break
        else:
            self.eof = True
        self.text += "".join(added)
        return size > 0

    def compact(self) -> None:
        if self.pos < _KEEP:
            return
        dropped = self.text[:self.pos]
        newlines = dropped.count("\n")
        self.line += newlines
        self.col = (self.col + len(dropped)) if not newlines else len(dropped) - dropped.rfind("\n")
        self.text, self.pos = self.text[self.pos:], 0

    def fail(self, message: str, index: int) -> InputError:
        head = self.text[:index]
        newlines = head.count("\n")
        col = self.col + index if not newlines else index - head.rfind("\n")
        return self.error(f"not valid JSON: {message}", self.path, self.line + newlines, col)

    def skip_ws(self) -> None:
        while True:
            while self.pos < len(self.text) and self.text[self.pos] in _WS:
                self.pos += 1
            if self.pos < len(self.text) or not self.more():
                return

    def peek(self) -> str:
        self.skip_ws()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, chars: str, what: str) -> str:
        c = self.peek()
        if not c or c not in chars:
            raise self.fail(f"Expecting {what}", self.pos)
        self.pos += 1
        return c

    def value(self, decode: Callable[[str, int], tuple[Any, int]]) -> Any:
        """The next JSON value; more text is read (doubling) until it decodes or the file ends."""
        self.skip_ws()
        while True:
            try:
                v, end = decode(self.text, self.pos)
            except json.JSONDecodeError as exc:
                if self.more(max(len(self.text) - self.pos, 4096)):
                    continue
                raise self.fail(exc.msg, exc.pos) from None
            if end == len(self.text) and not self.eof and self.text[self.pos] not in "{[\"":
                # a number or literal at the buffer's end may go on in the next line
                if self.more():
                    continue
            self.pos = end
            return v


def array_items(path: str | Path, member: str, *, what: str = "file", error: type[InputError] = InputError,
                parse_constant: Callable[[str], Any] | None = None, missing: str = "") -> Iterator[Any]:
    """The elements of the top-level object's array `member`, in order; `error` for a document that
    is not valid JSON, is not an object, or has no such array (after reading all of it; the
    message `no 'MEMBER' list` and then `missing`). A ValueError from `parse_constant` passes."""
    decoder = json.JSONDecoder(parse_constant=parse_constant)
    buf = _Buffer(read_blocks(path, what=what, error=error), path, error)
    found = False
    buf.expect("{", "'{'")
    if buf.peek() == "}":
        buf.pos += 1
    else:
        while True:
            if buf.peek() != '"':
                raise buf.fail("Expecting property name enclosed in double quotes", buf.pos)
            key = buf.value(decoder.raw_decode)
            buf.expect(":", "':' delimiter")
            if key == member and buf.peek() == "[":
                found = True
                buf.pos += 1
                if buf.peek() == "]":
                    buf.pos += 1
                else:
                    while True:
                        yield buf.value(decoder.raw_decode)
                        buf.compact()
                        if buf.expect(",]", "',' delimiter") == "]":
                            break
            else:
                buf.value(decoder.raw_decode)
                buf.compact()
            if buf.expect(",}", "',' delimiter") == "}":
                break
    if buf.peek():
        raise buf.fail("Extra data", buf.pos)
    if not found:
        raise error(f"no '{member}' list{missing}", path)
