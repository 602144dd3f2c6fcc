"""Files with the user's umask: what every writer of the package creates is readable by whoever
a plain `open(path, "w")` would let read it.

Two writers would otherwise make owner-only (0600) files: `tempfile.mkstemp` (which
`gmc_grpo.json_files.atomic_write_text` used for its temp file + rename) and `safetensors`' save
functions (checkpoints, `save_pretrained` model folders, the rollout cache), which write through
a private temp file themselves. `atomic_write_text` now creates its temp file with `os.open(...,
0o666)`, so the kernel applies the umask (and a folder's default ACL) exactly as for a plain
open; the safetensors writers call `give_plain_mode` on what they wrote.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from pathlib import Path

_UMASK_GUARD = threading.Lock()


def current_umask() -> int:
    """The process's umask (Linux: read from /proc without changing it; else set and restore)."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _UMASK_GUARD:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def plain_mode() -> int:
    """The permission bits a plain `open(path, "w")` gives a new file: `0o666 & ~umask`."""
    return 0o666 & ~current_umask()


def give_plain_mode(paths: Iterable[str | Path] | str | Path) -> None:
    """Set every regular file among `paths` (folders: every file below them) to `plain_mode()`."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    mode = plain_mode()
    for path in map(Path, paths):
        if path.is_dir() and not path.is_symlink():
            give_plain_mode(p for p in path.rglob("*") if p.is_file() and not p.is_symlink())
        elif path.is_file() and not path.is_symlink():
            os.chmod(path, mode)


__all__ = ["current_umask", "give_plain_mode", "plain_mode"]
