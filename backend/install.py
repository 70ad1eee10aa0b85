"""The light install `make run` and `make serve` need, with uv when it can (issue 43: a fresh clone's first
`make run` spent 110 of its 117 s in pip).

    python backend/install.py VENV CONSTRAINTS REQUIREMENT... [--no-deps REQUIREMENT...]

pip first puts uv (pinned here, `UV`) into the virtualenv, a few seconds; uv then installs the requirements
with pip's own index settings (`index-url`, `extra-index-url`, `find-links` from pip's configuration files and
PIP_* variables, every index weighed as pip weighs them). When uv cannot (no wheel for this platform, an index it
cannot read, RESEARCH_INSTALL_WITH_PIP=1), pip installs them as it did before. Standard library only: it runs
before anything of the project is installed.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

PIP_QUIET = ["--quiet", "--progress-bar", "off", "--disable-pip-version-check"]
# uv is pinned here, not in constraints.txt: a change there would have every full install (make test) reinstall
UV = "uv==0.13.9"


def pip_settings(python: str) -> dict[str, list[str]]:
    """pip's index settings as `pip config list` reports them (files and PIP_* variables), the last one winning."""
    listed = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True, text=True, check=False).stdout
    settings: dict[str, list[str]] = {}
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        name = key.rsplit(".", 1)[-1]
        if name in {"index-url", "extra-index-url", "find-links"}:
            settings[name] = shlex.split(value.strip().strip("'\"")) if value else []
    return settings


def uv_options(settings: dict[str, list[str]]) -> list[str]:
    options = ["--index-strategy", "unsafe-best-match"]  # pip's way: the best version from any index
    for url in settings.get("index-url", [])[:1]:
        options += ["--index-url", url]
    for url in settings.get("extra-index-url", []):
        options += ["--extra-index-url", url]
    for place in settings.get("find-links", []):
        options += ["--find-links", place]
    return options


def with_uv(venv: Path, constraints: str, requirements: list[str], no_deps: list[str]) -> bool:
    python = str(venv / "bin" / "python")
    got_uv = subprocess.run([python, "-m", "pip", "install", *PIP_QUIET, UV], check=False).returncode
    uv = venv / "bin" / "uv"
    if got_uv != 0 or not uv.exists():
        return False
    base = [str(uv), "pip", "install", "--quiet", "--python", python, *uv_options(pip_settings(python))]
    base += ["-c", constraints]
    if subprocess.run([*base, *requirements], check=False).returncode != 0:
        return False
    return not no_deps or subprocess.run([*base, "--no-deps", *no_deps], check=False).returncode == 0


def with_pip(venv: Path, constraints: str, requirements: list[str], no_deps: list[str]) -> None:
    python = str(venv / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", *PIP_QUIET, "-c", constraints, *requirements], check=True)
    if no_deps:
        subprocess.run(
            [python, "-m", "pip", "install", *PIP_QUIET, "-c", constraints, "--no-deps", *no_deps], check=True
        )


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    venv, constraints, rest = Path(argv[0]), argv[1], argv[2:]
    split = rest.index("--no-deps") if "--no-deps" in rest else len(rest)
    requirements, no_deps = rest[:split], rest[split + 1 :]
    started = time.monotonic()
    if os.environ.get("RESEARCH_INSTALL_WITH_PIP") == "1":
        print("RESEARCH_INSTALL_WITH_PIP=1: pip installs (about a minute and a half).", file=sys.stderr)
    elif with_uv(venv, constraints, requirements, no_deps):
        print(f"Installed with uv in {time.monotonic() - started:.0f} s.")
        return 0
    else:
        print("uv could not install here; pip installs instead (about a minute and a half).", file=sys.stderr)
    with_pip(venv, constraints, requirements, no_deps)
    print(f"Installed with pip in {time.monotonic() - started:.0f} s.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
