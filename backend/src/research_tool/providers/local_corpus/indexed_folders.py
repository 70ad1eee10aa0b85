"""The folders `research-tool index` was pointed at, remembered in the data dir: they are the `local`
provider's folders everywhere (`search`, `run`, the server, its page and MCP), with no --corpus needed.

A small JSON list (`<data dir>/indexed_folders.json`), written atomically; a folder that no longer exists is
left out when read.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from research_tool.core.settings import Settings

FOLDERS_FILE = "indexed_folders.json"


def _file(data_dir: Path) -> Path:
    return data_dir / FOLDERS_FILE


def _read(data_dir: Path) -> list[str]:
    try:
        value = json.loads(_file(data_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [str(v) for v in value] if isinstance(value, list) else []


def indexed_folders(data_dir: Path) -> list[Path]:
    """The remembered folders that still exist, in the order they were first indexed."""
    return [Path(p) for p in _read(data_dir) if Path(p).is_dir()]


def remembered_folders(data_dir: Path) -> list[tuple[str, bool]]:
    """Every remembered folder and whether it still exists (`research-tool index --list`)."""
    return [(p, Path(p).is_dir()) for p in _read(data_dir)]


def remember_folder(data_dir: Path, folder: Path) -> None:
    _write(data_dir, list(dict.fromkeys([*_read(data_dir), str(folder.resolve())])))


def forget_folder(data_dir: Path, folder: Path) -> bool:
    """Drop a folder (`research-tool index --remove DIR`); True when it was remembered."""
    folders = _read(data_dir)
    kept = [f for f in folders if f != str(folder)]
    if len(kept) == len(folders):
        return False
    _write(data_dir, kept)
    return True


def _write(data_dir: Path, folders: list[str]) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    handle, tmp_name = tempfile.mkstemp(dir=data_dir, prefix=f".{FOLDERS_FILE}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(folders, out, indent=1)
        os.replace(tmp_name, _file(data_dir))
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def local_folders(settings: Settings, chosen: Sequence[Path | str] = ()) -> list[Path]:
    """The `local` provider's folders: `chosen` (a request's corpus_dirs, --corpus) or else RESEARCH_CORPUS_DIRS,
    then every folder `research-tool index` indexed in this data dir; resolved, each once, in that order."""
    given = [Path(d).expanduser() for d in chosen] or [p.expanduser() for p in settings.corpus_paths()]
    folders: list[Path] = []
    for folder in [*given, *indexed_folders(settings.data_dir)]:
        try:
            folders.append(folder.resolve())
        except (OSError, RuntimeError, ValueError):  # unusable: kept as given, reported as not found later
            folders.append(folder)
    return list(dict.fromkeys(folders))
