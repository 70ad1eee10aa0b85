"""The Postgres storage backend (RESEARCH_DATABASE_URL): every module here imports psycopg, so nothing outside
this package imports it at module level; `runtime/backends.py` does it only in Postgres mode."""
