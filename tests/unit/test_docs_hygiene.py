"""The docs stay references, not a lab notebook.

Each page answers one question with the current truth, and git keeps the history. These checks
fail when docs/ grows back into run logs: too many lines in total, a results page too long to
read, raw outputs or files named after the round that made them, or development-history words
(a work session's, round's or issue's number) in docs, benchmarks or code.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
RESULTS = DOCS / "results"

MAX_DOCS_LINES = 8_000  # Markdown + text under docs/, all pages together
MAX_RESULTS_PAGE_LINES = 250  # one results page (or a table's text file) under docs/results/

# A file named after the round, session or issue that made it, or after a date.
HISTORY_NAME = re.compile(r"(session|round|issue)[-_]?\d+|brief|helper|\d{4}-\d{2}-\d{2}", re.IGNORECASE)
# A session, round or issue word followed by its number (see the pinned samples below); not
# "--rounds 5".
HISTORY_WORDS = re.compile(r"(?<![-\w])(session|round|issue)s?[ -]?#?\d+", re.IGNORECASE)

# A dated diary entry ("2026-11-27") or a commit hash told as narrative ("at bcb3edf").
DATE_OR_COMMIT = re.compile(r"\b\d{4}-\d{2}-\d{2}\b|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,12}\b")

TEXT_SUFFIXES = {".md", ".txt", ".py", ".lua", ".sh", ".toml", ".cfg", ".ini"}


def _doc_pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*") if p.is_file() and p.suffix in {".md", ".txt"})


def _line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def _text_files(*roots: Path) -> list[Path]:
    return sorted(p for root in roots for p in root.rglob("*")
                  if p.is_file() and p.suffix in TEXT_SUFFIXES and "__pycache__" not in p.parts)


def _history_words(paths: list[Path], pattern: re.Pattern[str] = HISTORY_WORDS) -> list[str]:
    hits = []
    for path in paths:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for m in pattern.finditer(line):
                hits.append(f"{path.relative_to(ROOT)}:{n}: {m.group(0)!r}")
    return hits


def test_docs_stay_under_their_line_budget() -> None:
    total = sum(_line_count(p) for p in _doc_pages())
    assert total < MAX_DOCS_LINES, f"docs/ has {total} lines of Markdown and text (budget {MAX_DOCS_LINES})"


def test_no_results_page_is_longer_than_one_reference_page() -> None:
    long = {str(p.relative_to(ROOT)): n for p in _doc_pages()
            if RESULTS in p.parents and (n := _line_count(p)) > MAX_RESULTS_PAGE_LINES}
    assert not long, f"pages over {MAX_RESULTS_PAGE_LINES} lines: {long}"


def test_no_file_is_named_after_the_round_that_made_it() -> None:
    named = [str(p.relative_to(ROOT)) for root in (DOCS, ROOT / "benchmarks")
             for p in root.rglob("*") if HISTORY_NAME.search(p.name)]
    assert not named, f"files named after a session, round, issue or date: {named}"


def test_docs_and_benchmarks_carry_no_history_words() -> None:
    hits = _history_words(_text_files(DOCS, ROOT / "benchmarks"))
    assert not hits, "development-history words:\n" + "\n".join(hits)


def test_docs_carry_no_dates_or_commit_hashes() -> None:
    hits = _history_words(_doc_pages(), DATE_OR_COMMIT)
    assert not hits, "dates or commit hashes in docs:\n" + "\n".join(hits)


def test_code_and_tests_carry_no_history_words() -> None:
    roots = [ROOT / d for d in ("pal_slurm", "job_submit_lua", "tests", "scripts", "etc", "sbin")]
    this_file = Path(__file__).resolve()  # its samples of history words are on purpose
    hits = _history_words([p for p in _text_files(*roots) if p.resolve() != this_file])
    assert not hits, "development-history words:\n" + "\n".join(hits)


def test_the_history_patterns_catch_what_they_are_for() -> None:
    # The checks above pass vacuously if the patterns match nothing: pin what they catch.
    for text in ("session 31", "Sessions 24-25", "round 12", "issue #10", "issue 12's model", "issue-12"):
        assert HISTORY_WORDS.search(text), text
    for text in ("--rounds 5", "a PostgreSQL session-level lock", "the round's free list", "an issue with it"):
        assert not HISTORY_WORDS.search(text), text
    for name in ("run-session32.txt", "w1-round3.json", "notes-2026-11-27.md", "issue12.md"):
        assert HISTORY_NAME.search(name), name
    assert not HISTORY_NAME.search("replay-workload-1-seed0-run1.json")
    for text in ("since 2026-11-27", "at bcb3edf", "(commit 1d1e4c3)"):
        assert DATE_OR_COMMIT.search(text), text
    for text in ("a facade", "deadline 1234567", "1.0001 of stock's"):
        assert not DATE_OR_COMMIT.search(text), text
