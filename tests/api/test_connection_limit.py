"""The default connection limit follows the process's open-file limit, so a server whose limit was raised
holds more clients while a laptop's default still keeps descriptors free for its databases."""

from __future__ import annotations

import resource

from research_tool.core.settings import Settings
from research_tool.runtime.http_server import DEFAULT_MAX_CONNECTIONS, connection_limit


def test_default_is_half_the_open_file_limit_with_a_ceiling() -> None:
    settings = Settings(max_connections=None)
    assert connection_limit(settings, open_files_limit=1024) == 512
    assert connection_limit(settings, open_files_limit=65536) == DEFAULT_MAX_CONNECTIONS
    assert connection_limit(settings, open_files_limit=resource.RLIM_INFINITY) == DEFAULT_MAX_CONNECTIONS
    assert connection_limit(settings, open_files_limit=1) == 1


def test_a_configured_limit_wins() -> None:
    assert connection_limit(Settings(max_connections=30), open_files_limit=65536) == 30
