"""`make bench` (`python -m research_tool.bench`): how fast the research backend works, as numbers anyone
can reproduce on one machine. Every load runs against replay servers and a uvicorn subprocess on
127.0.0.1; nothing leaves the machine. One module per benchmark; results print as a table and are
saved as JSON under the data dir (`bench/results-<timestamp>.json`)."""
