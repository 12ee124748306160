"""Notice a SQLite store file deleted or replaced under a long-running process.

SQLite keeps writing to the inode it opened: after `rm pal.db` pald's writes go to a file
nobody can ever read again, and every "ok" is a lie. The guard remembers the file's identity
(device, inode) and is checked around each transaction:

- before: the path is gone -> StoreUnavailable (nothing is written anywhere; the caller keeps
  its data buffered); the path names another file (restored from a backup, recreated by
  `palctl db upgrade`) -> the caller drops its connections and adopts the new file;
- after a write: the identity changed while we wrote -> StoreUnavailable, because the write
  may have gone to the old inode: the caller keeps the data and writes it again.

One `os.stat` per call (microseconds); the guard is owned by its repository's caller thread.
"""

from __future__ import annotations

import os
from typing import Callable

from pal_slurm.store.engine import missing_sqlite_message
from pal_slurm.store.errors import StoreUnavailable

FileId = tuple[int, int]


def file_id(path: str) -> FileId | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


class SqliteFileGuard:
    """Checks that `path` is still the file we opened; `on_replaced` drops old connections."""

    def __init__(self, path: str, on_replaced: Callable[[], None]) -> None:
        self.path = path
        self._on_replaced = on_replaced
        self.opened = file_id(path)

    def before(self) -> None:
        now = file_id(self.path)
        if now is None:
            self._on_replaced()  # no connection may keep writing to the deleted inode
            raise StoreUnavailable(
                f"the store file {self.path} was deleted while in use; nothing was written "
                f"there since. {missing_sqlite_message(self.path)}"
            )
        if now != self.opened:
            self._on_replaced()
            self.opened = now

    def after_write(self) -> None:
        now = file_id(self.path)
        if now is None:  # the same words as `before`: an admin sees one message per cause
            raise StoreUnavailable(
                f"the store file {self.path} was deleted while in use, during a write; the "
                f"write is kept to be done again. {missing_sqlite_message(self.path)}"
            )
        if now != self.opened:
            raise StoreUnavailable(
                f"the store file {self.path} was replaced during a write; "
                "the write is kept to be done again"
            )
