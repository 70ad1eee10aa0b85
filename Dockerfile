# The Research Tool server image (docker-compose.yml builds it). One process, one worker: it owns the
# SQLite files under /data (sessions, events, checkpoints, memory, indexes, exports).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    RESEARCH_DATA_DIR=/data \
    RESEARCH_LOG_FORMAT=json

WORKDIR /app
COPY pyproject.toml constraints.txt README.md ./
COPY backend ./backend
RUN pip install -c constraints.txt '.[llm,postgres,redis,otel]' \
    && useradd --create-home --uid 1000 research \
    && mkdir -p /data \
    && chown research:research /data

USER research
VOLUME ["/data"]
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"
CMD ["research-tool", "serve", "--host", "0.0.0.0", "--port", "8000"]
