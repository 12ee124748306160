"""Typed store failures, so callers can tell "the database is away" from "you asked nonsense".

pald keeps serving from memory on `StoreUnavailable`; the prolog spools samples to disk on it;
palctl prints the message. `StoreFull` is a `StoreUnavailable` because the remedy is the same for
a caller (retry later, keep the data elsewhere) while the admin's message differs.
"""

from __future__ import annotations


class StoreError(Exception):
    """Base of every error the store raises on purpose."""


class StoreUnavailable(StoreError):
    """The database cannot be reached or used right now (down, locked, unreachable, no file)."""


class StoreFull(StoreUnavailable):
    """The database (or the disk under it) has no room for the write."""


class InvalidRecord(StoreError, ValueError):
    """A record the store refuses: unknown class, empty name, negative slot, ..."""
