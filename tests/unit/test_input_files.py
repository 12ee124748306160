import pytest

from pal_slurm.input_files import InputError, parse_csv, read_csv, read_lines, read_text, stream_csv


def test_oversized_file_is_refused_before_reading(tmp_path):
    p = tmp_path / "big.csv"
    p.write_text("a\n" + "1\n" * 100)
    with pytest.raises(InputError, match=r"big.csv: trace is 202 bytes; more than the 100"):
        read_text(p, what="trace", max_bytes=100)


def test_nul_and_directory(tmp_path):
    p = tmp_path / "n.csv"
    p.write_bytes(b"a,b\n1,\x002\n")
    with pytest.raises(InputError, match=r"n.csv:2:3: NUL"):
        read_text(p)
    with pytest.raises(InputError, match="is a directory"):
        read_text(tmp_path)


def test_rows_and_cells():
    t = parse_csv("x, y\n\n1,2.5\n", "f.csv", required=("x", "y"))
    assert t.header == ("x", "y") and len(t.rows) == 1
    row = t.rows[0]
    assert row.line == 3 and row.integer("x", minimum=1) == 1 and row.number("y", maximum=3) == 2.5
    with pytest.raises(InputError, match=r"^f.csv:3:2: y: must be <= 2"):
        row.number("y", maximum=2)
    with pytest.raises(InputError, match=r"^f.csv:1: missing column\(s\) z"):
        parse_csv("x,y\n", "f.csv", required=("z",))
    with pytest.raises(InputError, match=r"^f.csv:1: column\(s\) x appear more than once"):
        parse_csv("x,x\n", "f.csv")
    with pytest.raises(InputError, match=r"^f.csv:3: more than 1 rows"):
        parse_csv("x\n1\n2\n", "f.csv", max_rows=1)


def test_read_csv_error_type_is_the_callers(tmp_path):
    class MyError(InputError):
        pass

    with pytest.raises(MyError, match="cannot open"):
        read_csv(tmp_path / "none.csv", error=MyError)


def test_an_integer_too_large_for_the_store_is_an_error_naming_the_cell():
    row = parse_csv("slot\n1e300\n", "v.csv").rows[0]
    with pytest.raises(InputError, match=r"^v.csv:2:1: slot: must be <= "):
        row.integer("slot", minimum=0)
    assert parse_csv("slot\n9223372036854775807\n", "v.csv").rows[0].integer("slot") == 2**63 - 1


def test_read_lines_checks_each_line_as_read_text_does(tmp_path):
    p = tmp_path / "s.txt"
    p.write_bytes(b"\xef\xbb\xbfa|b\n1|2\n3|\x004\n")
    lines = read_lines(p, what="accounting file")
    assert next(lines) == "a|b\n" and next(lines) == "1|2\n"  # the bad line is not read yet
    with pytest.raises(InputError, match=r"s.txt:3:3: NUL"):
        next(lines)
    p.write_bytes(b"a\nok\nb\xffc\n")
    with pytest.raises(InputError, match=r"s.txt:3:2: not UTF-8 text \(byte 0xff\)"):
        list(read_lines(p))
    with pytest.raises(InputError, match="is a directory"):
        list(read_lines(tmp_path))


def test_stream_csv_checks_the_header_at_once_and_rows_when_reached(tmp_path):
    with pytest.raises(InputError, match=r"^f.csv:1: missing column\(s\) z"):
        stream_csv(iter(["x|y\n"]), "f.csv", required=("z",), delimiter="|", quoting=False)
    header, rows = stream_csv(iter(["x|y\n", "1|2\n", "\n", "3\n"]), "f.csv", delimiter="|", quoting=False)
    assert header == ("x", "y")
    assert next(rows).values == {"x": "1", "y": "2"}
    with pytest.raises(InputError, match=r"^f.csv:4:2: 1 field\(s\), the header has 2"):
        next(rows)


def test_read_lines_gives_the_same_lines_and_errors_whatever_the_block_size(tmp_path, monkeypatch):
    """Blocks, not lines, are decoded: a line across blocks, longer than one, or last without its
    end reads as it is, and a bad byte still names its line after the good lines before it."""
    from pal_slurm import input_files

    monkeypatch.setattr(input_files, "_BLOCK", 4)
    p = tmp_path / "s.txt"
    p.write_bytes(b"\xef\xbb\xbfa|b\nlonger than a block \xc3\xa9|x\r\n\n3|4")
    assert list(read_lines(p)) == ["a|b\n", "longer than a block \u00e9|x\r\n", "\n", "3|4"]
    p.write_bytes(b"a\nok\nb\xffc\nd\n")
    lines = read_lines(p)
    assert next(lines) == "a\n" and next(lines) == "ok\n"
    with pytest.raises(InputError, match=r"s.txt:3:2: not UTF-8 text \(byte 0xff\)"):
        next(lines)
    p.write_bytes(b"a\nb\x00\n\xff\n")  # the NUL's line comes first, as when read a line at a time
    with pytest.raises(InputError, match=r"s.txt:2:2: NUL"):
        list(read_lines(p))


def test_split_rows_reads_unquoted_rows_as_stream_csv_does():
    from pal_slurm.input_files import csv_row, split_rows

    with pytest.raises(InputError, match=r"^f.txt:1: missing column\(s\) z"):
        split_rows(iter(["x|y\n"]), "f.txt", required=("z",))
    header, rows = split_rows(iter(["x|y\n", ' "1"|2\r\n', "\n", "  \n", "3\n"]), "f.txt")
    assert header == ("x", "y")
    line, fields = next(rows)
    assert (line, fields) == (2, [' "1"', "2"])  # never quoted, not stripped
    assert csv_row("f.txt", line, header, fields).integer("y") == 2
    with pytest.raises(InputError, match=r"^f.txt:5:2: 1 field\(s\), the header has 2"):
        next(rows)
