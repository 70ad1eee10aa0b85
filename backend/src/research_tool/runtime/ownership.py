"""Who runs the sessions of a data dir: an advisory file lock on `<data dir>/owner.lock`.

Every process that runs sessions (`research-tool run`/`resume`/`mcp`, the server) holds a shared lock on the
file for as long as its research services are open; the kernel drops it when the process dies, however it
dies. A reader (`research-tool sessions`, `show`) that can take the lock exclusively knows that no process is
running anything, so a session whose row still says queued, running, stopping or awaiting answers was
interrupted (its process was killed or Ctrl-C'd) and is resumable.

On a platform without `fcntl` ownership is unknown and rows are shown as stored.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from research_tool.models.sessions import INTERRUPTED, UNFINISHED_STATUSES, SessionStatus

try:
    import fcntl

    HAVE_FLOCK = True
except ImportError:  # pragma: no cover - Windows
    HAVE_FLOCK = False

LOCK_FILE = "owner.lock"


def lock_path(data_dir: Path) -> Path:
    return data_dir / LOCK_FILE


def _open_lock(data_dir: Path) -> int:
    data_dir.mkdir(parents=True, exist_ok=True)
    return os.open(lock_path(data_dir), os.O_RDWR | os.O_CREAT, 0o644)


class DataDirOwner:
    """The shared owner lock, held from `acquire` to `release` (or to the process's end)."""

    def __init__(self, fd: int | None) -> None:
        self._fd = fd

    @classmethod
    async def acquire(cls, data_dir: Path) -> DataDirOwner:
        if not HAVE_FLOCK:  # pragma: no cover
            return cls(None)
        fd = await asyncio.to_thread(_open_lock, data_dir)
        try:
            await asyncio.to_thread(fcntl.flock, fd, fcntl.LOCK_SH)
        except BaseException:
            os.close(fd)
            raise
        return cls(fd)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the lock
            self._fd = None


@asynccontextmanager
async def holding_data_dir(data_dir: Path) -> AsyncIterator[None]:
    """Hold the shared owner lock while the block runs sessions."""
    owner = await DataDirOwner.acquire(data_dir)
    try:
        yield
    finally:
        owner.release()


def owner_alive(data_dir: Path) -> bool | None:
    """True when some process holds the owner lock, False when none does, None when unknown."""
    if not HAVE_FLOCK:  # pragma: no cover - Windows
        return None
    if not lock_path(data_dir).exists():
        return False
    fd = os.open(lock_path(data_dir), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def shown_status(status: SessionStatus, alive: bool | None) -> SessionStatus:
    """The status to show: an unfinished session with no live owner process is interrupted."""
    if alive is False and status in UNFINISHED_STATUSES:
        return INTERRUPTED
    return status
