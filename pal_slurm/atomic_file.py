"""One way to write a file whole or not at all: a temporary file in the same folder, then a
rename. A reader (Slurm reading gres.conf, a merge job reading a sweep element, a site's tool
reading --output) never sees half a file, and a failed write leaves the old one in place."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: str | os.PathLike[str], text: str, mode: int | None = None) -> None:
    """`text` into `path` through a temporary file beside it and a rename; `mode`: the file's
    permissions (None: mkstemp's 0600). The temporary file is removed when anything fails."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.absolute().parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
