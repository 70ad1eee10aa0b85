"""Research Tool: a self-hosted deep-research backend."""

__version__ = "0.1.0"
