"""Reading files a user hands us (traces, variability data, accounting dumps): one error type.

Everything from outside goes through here so that every malformed input gets the same kind of
answer: an `InputError` whose message starts `FILE:LINE:COLUMN:` (compiler style; line and column
1-based, column = CSV field position or character position) and says what was wrong and what was
expected. Nothing here raises anything else for bad content: a non-UTF-8 byte, a NUL, a ragged
row, a NaN, an infinity, a negative or absurdly large number, a file too big to be a trace
(accounting dumps excepted: `read_lines`/`read_blocks` with `split_rows`, and `json_stream` for
JSON, read a file of any size a block of rows or an element at a time).
A UTF-8 byte-order mark is accepted and stripped (spreadsheets write one).

Why one module: the simulator loops on the numbers it is given. A NaN duration never reaches
its iteration count (a hang), a NaN time never compares equal to itself (another hang), an
infinity ends up as "inf" in a report. Stopping those at the border, with the file and the
cell, is both the friendliest and the safest place.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generator, Iterable, Iterator, Mapping, Sequence

MAX_INPUT_BYTES = 512 * 1024 * 1024  # larger than any trace or dataset we have seen by 100x
MAX_ROWS = 5_000_000

MAX_INTEGER = 2**63 - 1  # the largest integer an input file may hold (SQL BIGINT)


class InputError(ValueError):
    """A file (or value) that cannot be used; `str()` is one line naming file, line and column."""

    def __init__(self, message: str, path: str | Path | None = None, line: int | None = None,
                 column: int | None = None):
        self.path = None if path is None else str(path)
        self.line = line
        self.column = column
        self.reason = message
        super().__init__(where(path, line, column) + message)


def where(path: str | Path | None, line: int | None = None, column: int | None = None) -> str:
    """'file:line:column: ' (the parts that are known), or '' when nothing is."""
    parts = [str(p) for p in (path, line, column) if p is not None]
    return ":".join(parts) + ": " if parts else ""


def read_text(path: str | Path, *, what: str = "file", max_bytes: int | None = MAX_INPUT_BYTES,
              error: type[InputError] = InputError) -> str:
    """The file's text: UTF-8 (a BOM is stripped), no NULs, at most `max_bytes` (None: any size)."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if max_bytes is not None and size > max_bytes:
            raise error(f"{what} is {size} bytes; more than the {max_bytes} this reads", path)
        data = path.read_bytes()
    except IsADirectoryError:
        raise error(f"cannot open {what}: is a directory", path) from None
    except OSError as exc:
        raise error(f"cannot open {what}: {exc.strerror or exc}", path) from None
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, col = _line_col(data, exc.start)
        raise error(f"not UTF-8 text (byte 0x{data[exc.start]:02x}); save the {what} as UTF-8", path, line, col) from None
    nul = text.find("\0")
    if nul >= 0:
        line, col = _line_col(text, nul)
        raise error(f"NUL character: not a text {what}", path, line, col)
    return text


def read_lines(path: str | Path, *, what: str = "file",
               error: type[InputError] = InputError) -> Generator[str, None, None]:
    """The file's lines (ends kept), read as they are needed (`read_blocks`): memory holds one
    block whatever the file's size. The lines before a bad one are given first."""
    for text in read_blocks(path, what=what, error=error):
        lines = text.split("\n")
        last = lines.pop()  # "" when the block ends with a line end (all blocks but the file's last)
        for line in lines:
            yield line + "\n"
        if last:
            yield last


def read_blocks(path: str | Path, *, what: str = "file",
                error: type[InputError] = InputError) -> Generator[str, None, None]:
    """The file's text in blocks of whole lines (about `_BLOCK` bytes, or one line when a line
    is longer), read as they are needed: memory holds one block whatever the file's size. The
    same checks as `read_text` (UTF-8, BOM stripped, no NUL) naming the line; the text before
    the bad line is given first. Blocks, not lines, are decoded and checked: a large accounting
    dump is millions of lines, and a decode and a NUL search per line were most of the time
    spent reading it."""
    path = Path(path)
    try:
        f = path.open("rb")
    except IsADirectoryError:
        raise error(f"cannot open {what}: is a directory", path) from None
    except OSError as exc:
        raise error(f"cannot open {what}: {exc.strerror or exc}", path) from None
    with f:
        number = 0  # line ends given so far
        head = f.read(3)
        pending = [] if head == b"\xef\xbb\xbf" else [head]
        while True:
            block = f.read(_BLOCK)
            cut = block.rfind(b"\n") + 1
            if block and not cut:  # no line ends here: a long line goes on
                pending.append(block)
                continue
            data = b"".join(pending) + block[:cut] if pending else block[:cut]
            pending = [block[cut:]] if cut else []
            if not block:  # the end: what is left is the last line, which has no end
                data, pending = data + b"".join(pending), []
            if data:
                number = yield from _checked_text(data, number, path, what, error)
            if not block:
                return


_BLOCK = 1 << 15  # a few hundred lines of accounting: per-block costs vanish, memory stays small


def _checked_text(data: bytes, number: int, path: Path, what: str,
                  error: type[InputError]) -> Generator[str, None, int]:
    """The text of whole lines `data` (after `number` lines), or the text before its first bad
    line and then the error; the number of lines after it."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = exc.start
        start = data.rfind(b"\n", 0, bad) + 1  # the lines before the bad byte's are UTF-8 (and may hold a NUL)
        number = yield from _checked_text(data[:start], number, path, what, error)
        raise error(f"not UTF-8 text (byte 0x{data[bad]:02x}); save the {what} as UTF-8", path, number + 1,
                    len(data[start:bad].decode("latin-1")) + 1) from None
    nul = text.find("\0")
    if nul >= 0:
        start = text.rfind("\n", 0, nul) + 1
        number = yield from _checked_text(text[:start].encode(), number, path, what, error)
        raise error(f"NUL character: not a text {what}", path, number + 1, nul - start + 1)
    if text:
        yield text
    return number + text.count("\n")


def _line_col(buf: str | bytes, index: int) -> tuple[int, int]:
    head = buf[:index] if isinstance(buf, str) else buf[:index].decode("latin-1")  # one char per byte
    line = head.count("\n") + 1
    start = head.rfind("\n") + 1
    return line, index - start + 1


@dataclass(frozen=True)
class CsvRow:
    """One data row: values by column name, with the file/line to name in errors."""

    path: str
    line: int
    values: Mapping[str, str]
    columns: Mapping[str, int]  # column name -> 1-based position
    error: type[InputError] = InputError

    def fail(self, message: str, column: str | None = None) -> InputError:
        col = self.columns.get(column) if column else None
        label = f"{column}: " if column else ""
        return self.error(label + message, self.path, self.line, col)

    def get(self, name: str, default: str = "") -> str:
        v = self.values.get(name)
        return default if v is None else v.strip()

    def text(self, name: str) -> str:
        v = self.get(name)
        if not v:
            raise self.fail("empty; a value is required", name)
        return v

    def number(self, name: str, *, minimum: float | None = None, above: float | None = None,
               maximum: float | None = None) -> float:
        """A finite float in range; NaN, inf and out-of-range values are errors."""
        raw = self.get(name)
        try:
            v = float(raw)
        except ValueError:
            raise self.fail(f"not a number: {raw!r}", name) from None
        return self._check(name, raw, v, minimum, above, maximum)

    def integer(self, name: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
        raw = self.get(name)
        try:
            v = int(raw)
        except ValueError:
            try:
                f = float(raw)
            except ValueError:
                raise self.fail(f"not an integer: {raw!r}", name) from None
            if not (math.isfinite(f) and f == int(f)):
                raise self.fail(f"not an integer: {raw!r}", name) from None
            v = int(f)
        # no integer we read fits outside 64 bits (the store's integers): "1e300" is an error, not a crash
        return int(self._check(name, raw, v, minimum, None, MAX_INTEGER if maximum is None else maximum))

    def _check(self, name: str, raw: str, v: float, minimum: float | None, above: float | None,
               maximum: float | None) -> float:
        if not math.isfinite(v):
            raise self.fail(f"must be a finite number, got {raw!r}", name)
        if minimum is not None and v < minimum:
            raise self.fail(f"must be >= {minimum:g}, got {raw!r}", name)
        if above is not None and v <= above:
            raise self.fail(f"must be > {above:g}, got {raw!r}", name)
        if maximum is not None and v > maximum:
            raise self.fail(f"must be <= {maximum:g}, got {raw!r}", name)
        return v


@dataclass(frozen=True)
class CsvTable:
    path: str
    header: tuple[str, ...]
    rows: tuple[CsvRow, ...]


def parse_csv(text: str, path: str | Path, *, what: str = "file", required: Sequence[str] = (),
              error: type[InputError] = InputError, max_rows: int = MAX_ROWS, delimiter: str = ",",
              quoting: bool = True) -> CsvTable:
    """Rows of a CSV with a header line. Blank lines are skipped; ragged rows are errors.

    `delimiter="|", quoting=False` reads `sacct -P` (which never quotes).
    """
    header, rows = stream_csv(io.StringIO(text, newline=""), path, what=what, required=required, error=error,
                              max_rows=max_rows, delimiter=delimiter, quoting=quoting)
    return CsvTable(str(path), header, tuple(rows))


def stream_csv(lines: Iterable[str], path: str | Path, *, what: str = "file", required: Sequence[str] = (),
               error: type[InputError] = InputError, max_rows: int | None = None, delimiter: str = ",",
               quoting: bool = True) -> tuple[tuple[str, ...], Iterator[CsvRow]]:
    """(header, rows read as they are asked for): `parse_csv` for a file of any size (with
    `read_lines`); the header is checked at once, each row when it is reached."""
    path = str(path)
    reader = csv.reader(lines, delimiter=delimiter, quoting=csv.QUOTE_MINIMAL if quoting else csv.QUOTE_NONE)
    try:
        first = next(reader, None)
    except csv.Error as exc:
        raise error(f"malformed CSV: {exc}", path, reader.line_num) from None
    if first is None:
        raise error(f"empty {what}", path)
    header = _header(first, path, what, required, error)
    return header, _csv_rows(reader, header, path, what, error, max_rows)


def _header(first: Sequence[str], path: str, what: str, required: Sequence[str],
            error: type[InputError]) -> tuple[str, ...]:
    """A header line's column names, checked: the required ones there, none twice."""
    header = [h.strip() for h in first]
    if required:
        missing = [c for c in required if c not in header]
        if missing:
            raise error(f"missing column(s) {', '.join(missing)}; the header is {','.join(header)!r}, "
                        f"expected {','.join(required)}", path, 1)
    dupes = sorted({h for h in header if h and header.count(h) > 1})
    if dupes:
        raise error(f"column(s) {', '.join(dupes)} appear more than once in the header", path, 1)
    return tuple(header)


def _ragged(fields: int, header: int, path: str, line: int, error: type[InputError]) -> InputError:
    return error(f"{fields} field(s), the header has {header}", path, line,
                 min(fields, header) + 1 if fields < header else header + 1)


def split_rows(lines: Iterable[str], path: str | Path, *, what: str = "file", required: Sequence[str] = (),
               error: type[InputError] = InputError,
               delimiter: str = "|") -> tuple[tuple[str, ...], Iterator[tuple[int, list[str]]]]:
    """(header, (line, fields) of each row as it is asked for): `stream_csv` for a file whose
    fields are never quoted (`sacct -P`), split with `str.split` and given as lists, no CsvRow
    per row: a large site's accounting is millions of rows, and a CsvRow each was a third of the
    time spent reading them. Fields are not stripped. Blank lines are skipped, ragged rows are
    errors, as in `stream_csv`; `csv_row` makes the CsvRow of a row to name a cell in an error."""
    path = str(path)
    it = iter(lines)
    first = next(it, None)
    if first is None:
        raise error(f"empty {what}", path)
    header = _header(first.rstrip("\r\n").split(delimiter), path, what, required, error)
    return header, _split_rows(it, len(header), path, error, delimiter)


def _split_rows(lines: Iterator[str], width: int, path: str, error: type[InputError],
                delimiter: str) -> Iterator[tuple[int, list[str]]]:
    for number, line in enumerate(lines, start=2):
        fields = line.rstrip("\r\n").split(delimiter)
        if len(fields) != width:
            if all(not f.strip() for f in fields):
                continue
            raise _ragged(len(fields), width, path, number, error)
        if width == 1 and not fields[0].strip():
            continue
        yield number, fields


def csv_row(path: str, line: int, header: Sequence[str], fields: Sequence[str],
            error: type[InputError] = InputError) -> CsvRow:
    """The CsvRow of a `split_rows` row (for its checked readers and its errors' cell)."""
    return CsvRow(path, line, dict(zip(header, fields)), {h: i + 1 for i, h in enumerate(header) if h}, error)


def _csv_rows(reader: Any, header: Sequence[str], path: str, what: str, error: type[InputError],
              max_rows: int | None) -> Iterator[CsvRow]:
    columns = {h: i + 1 for i, h in enumerate(header) if h}
    count = 0
    try:
        for fields in reader:
            line = reader.line_num
            if not fields or all(not f.strip() for f in fields):
                continue
            if len(fields) != len(header):
                raise _ragged(len(fields), len(header), path, line, error)
            if max_rows is not None and count >= max_rows:
                raise error(f"more than {max_rows} rows; split the {what}", path, line)
            count += 1
            yield CsvRow(path, line, dict(zip(header, fields)), columns, error)
    except csv.Error as exc:
        raise error(f"malformed CSV: {exc}", path, reader.line_num) from None


def read_csv(path: str | Path, *, what: str = "file", required: Sequence[str] = (),
             error: type[InputError] = InputError) -> CsvTable:
    """`parse_csv(read_text(path))`: the one way user CSVs are read."""
    return parse_csv(read_text(path, what=what, error=error), path, what=what, required=required, error=error)


