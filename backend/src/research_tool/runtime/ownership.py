"""Who runs the sessions of a data dir: an exclusive advisory file lock on `<data dir>/owner.lock`.

One process owns a SQLite data dir. Every process that writes sessions (`research-tool serve`, `run`,
`resume`, `delete`, `gc`, `mcp`) takes the lock exclusively, without waiting, for as long as its research
services are open (`serve`: for the server's whole life), and writes its PID into the file. A second such
process finds the lock taken and stops with `DataDirInUseError` naming that PID (the CLI: one line, exit 2):
two servers on one data dir both resumed the same sessions and wrote the same event numbers (issue 22). The
kernel drops the lock when the process dies, however it dies, so a killed owner never blocks its successor.

Within one process the lock is counted, not taken twice (`serve` takes it before uvicorn starts, the app's
lifespan again). Readers (`research-tool sessions`, `show`) take no lock: a reader that finds the lock free
(`owner_alive`) knows that no process is running anything, so a session whose row still says queued,
running, stopping or awaiting answers was interrupted and is resumable. Postgres takes no lock at all (any
number of processes share it).

On a platform without `fcntl` ownership is unknown: no lock is taken and rows are shown as stored.
"""

from __future__ import annotations

import asyncio
import os
import stat
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from research_tool.core.errors import DataDirInUseError
from research_tool.models.sessions import INTERRUPTED, UNFINISHED_STATUSES, SessionStatus

try:
    import fcntl

    HAVE_FLOCK = True
except ImportError:  # pragma: no cover - Windows
    HAVE_FLOCK = False

LOCK_FILE = "owner.lock"
# `serve` writes the URL it listens on beside the lock, so a `run` locked out of the data dir can name it
SERVER_URL_FILE = "server.url"
# A reader's liveness probe holds the lock for a moment (shared): an owner starting just then tries again
# for this long before it concludes that another process owns the data dir.
CLAIM_PATIENCE_S = 1.0
CLAIM_RETRY_S = 0.02


def lock_path(data_dir: Path) -> Path:
    return data_dir / LOCK_FILE


@dataclass
class _Claim:
    fd: int
    holders: int


_claims: dict[Path, _Claim] = {}  # this process's claims, by resolved data dir
_claims_lock = threading.Lock()


def _key(data_dir: Path) -> Path:
    return data_dir.resolve()


def not_a_lock_file(data_dir: Path, what: str) -> DataDirInUseError:
    return DataDirInUseError(
        f"{lock_path(data_dir)} is {what}, not the data dir's lock file: remove it (the server writes its own)",
        owner_pid=None,
    )


def _open_lock(data_dir: Path, flags: int) -> int:
    """The lock file's descriptor, only if it is a regular file: a symlink is never followed (its target would
    be truncated and overwritten with our PID), a FIFO never blocks the open (O_NONBLOCK), and a directory,
    FIFO or device is refused with one line (DataDirInUseError, CLI exit 2) instead of a traceback or a hang."""
    path = lock_path(data_dir)
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as exc:
        if os.path.islink(path):
            raise not_a_lock_file(data_dir, "a symbolic link") from None
        if os.path.isdir(path):
            raise not_a_lock_file(data_dir, "a directory") from None
        raise DataDirInUseError(f"cannot open {path}: {exc.strerror or exc}", owner_pid=None) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise not_a_lock_file(data_dir, "a FIFO, socket or device")
    return fd


def owner_pid(data_dir: Path) -> int | None:
    """The PID the owner wrote into the lock file (None: not written, or not a number, or not a regular file)."""
    try:
        fd = _open_lock(data_dir, os.O_RDONLY)
    except DataDirInUseError:
        return None
    try:
        text = os.read(fd, 32).decode("ascii", errors="replace").strip()
    except OSError:
        return None
    finally:
        os.close(fd)
    return int(text) if text.isdecimal() else None


def _read_regular(path: Path, limit: int) -> str | None:
    """At most `limit` bytes of `path` when it is a regular file; None otherwise (a symlink is not followed, a
    FIFO does not block the open, anything else than a regular file is not read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, limit).decode("utf-8", errors="replace")
    except OSError:
        return None
    finally:
        os.close(fd)


def _url_file_pid(text: str | None) -> tuple[int | None, str]:
    pid, _, url = (text or "").strip().partition(" ")
    return (int(pid) if pid.isdecimal() else None), url


def serving_url(data_dir: Path) -> str | None:
    """The URL the server owning `data_dir` wrote (`record_serving_url`): None when there is none, when the
    file is stale (another PID than the lock's owner: a server killed before it could remove it), or when it
    is not a regular file (a symlink or FIFO there is neither followed nor waited on)."""
    pid, url = _url_file_pid(_read_regular(data_dir / SERVER_URL_FILE, 512))
    if pid is None or pid != owner_pid(data_dir):
        return None
    return url if url.startswith(("http://", "https://")) and len(url) < 300 and url.isprintable() else None


def record_serving_url(data_dir: Path, url: str | None) -> None:
    """Write (or, with None, remove) the URL of the server that owns `data_dir`, with its PID.

    Written to a new file beside it (O_EXCL: never through a link) and renamed over `server.url`: whatever
    was there (a symlink, a FIFO, a stale file) is replaced, never written through or waited on. Removed only
    when it is this process's own file."""
    path = data_dir / SERVER_URL_FILE
    if url is None:
        if _url_file_pid(_read_regular(path, 512))[0] == os.getpid():
            with suppress(OSError):
                path.unlink()
        return
    scratch = data_dir / f".{SERVER_URL_FILE}.{os.getpid()}"
    try:
        with suppress(FileNotFoundError):
            scratch.unlink()
        fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            os.write(fd, f"{os.getpid()} {url}\n".encode())
        finally:
            os.close(fd)
        os.replace(scratch, path)
    except OSError:  # a directory in its place, a read-only data dir: `run` then names no URL, nothing more
        with suppress(OSError):
            scratch.unlink()


def in_use_error(data_dir: Path) -> DataDirInUseError:
    """One line naming the owner and both ways out: another data dir, or the running server's own URL."""
    pid = owner_pid(data_dir)
    who = f"process {pid}" if pid is not None else "another process"
    url = serving_url(data_dir) if owner_alive(data_dir) else None
    if url is not None:
        ways = f"ask that server at {url} (its page, or the API: docs/api.md), or use another data dir"
        who = f"the server at {url} ({who})"
    else:
        ways = "stop it, or use another data dir"
    return DataDirInUseError(
        f"data dir {data_dir} is in use by {who}: one process per SQLite data dir; {ways} "
        "(RESEARCH_DATA_DIR=another-dir research-tool ...), or share Postgres via RESEARCH_DATABASE_URL",
        owner_pid=pid,
    )


def _try_claim(data_dir: Path) -> bool:
    """Take (or count) this process's exclusive claim; False when another process holds the lock."""
    key = _key(data_dir)
    with _claims_lock:
        claim = _claims.get(key)
        if claim is not None:
            claim.holders += 1
            return True
        data_dir.mkdir(parents=True, exist_ok=True)
        fd = _open_lock(data_dir, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        _claims[key] = _Claim(fd=fd, holders=1)
        return True


def _release(data_dir: Path) -> None:
    key = _key(data_dir)
    with _claims_lock:
        claim = _claims.get(key)
        if claim is None:
            return
        claim.holders -= 1
        if claim.holders > 0:
            return
        del _claims[key]
        with suppress(OSError):
            os.ftruncate(claim.fd, 0)  # no stale PID for the next reader
        os.close(claim.fd)  # closing the descriptor releases the lock


class DataDirOwner:
    """This process's exclusive claim on a data dir, held from `acquire`/`claim` to `release`."""

    def __init__(self, data_dir: Path | None) -> None:
        self._data_dir = data_dir

    @classmethod
    def claim(cls, data_dir: Path) -> DataDirOwner:
        """Blocking (at most CLAIM_PATIENCE_S): take the claim or raise DataDirInUseError."""
        if not HAVE_FLOCK:  # pragma: no cover
            return cls(None)
        deadline = time.monotonic() + CLAIM_PATIENCE_S
        while not _try_claim(data_dir):
            if time.monotonic() >= deadline:
                raise in_use_error(data_dir)
            time.sleep(CLAIM_RETRY_S)
        return cls(data_dir)

    @classmethod
    async def acquire(cls, data_dir: Path) -> DataDirOwner:
        """`claim` for the event loop (it waits with asyncio.sleep)."""
        if not HAVE_FLOCK:  # pragma: no cover
            return cls(None)
        deadline = time.monotonic() + CLAIM_PATIENCE_S
        while not await asyncio.to_thread(_try_claim, data_dir):
            if time.monotonic() >= deadline:
                raise in_use_error(data_dir)
            await asyncio.sleep(CLAIM_RETRY_S)
        return cls(data_dir)

    def release(self) -> None:
        if self._data_dir is not None:
            _release(self._data_dir)
            self._data_dir = None


@asynccontextmanager
async def holding_data_dir(data_dir: Path) -> AsyncIterator[None]:
    """Hold the exclusive owner claim while the block runs sessions."""
    owner = await DataDirOwner.acquire(data_dir)
    try:
        yield
    finally:
        owner.release()


def owner_alive(data_dir: Path) -> bool | None:
    """True when some process holds the owner lock, False when none does, None when unknown. The probe is a
    shared lock taken and dropped at once, so it never makes an owner starting meanwhile fail."""
    if not HAVE_FLOCK:  # pragma: no cover - Windows
        return None
    if not os.path.lexists(lock_path(data_dir)):
        return False
    try:
        fd = _open_lock(data_dir, os.O_RDONLY)
    except DataDirInUseError:  # not a lock file (a FIFO, a symlink...): nobody can tell
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
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
