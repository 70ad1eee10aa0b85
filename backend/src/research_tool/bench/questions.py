"""The questions the server benchmarks ask, round robin: how-to questions the Wikipedia replay's pydoc pages
answer, so every session does the full work of a standard session."""

QUESTIONS = (
    "How do I run a subprocess with a timeout and capture its output?",
    "How do I read and write JSON files with the json module?",
    "How do I copy a directory tree and remove files with shutil?",
    "How do I parse command line arguments with argparse subcommands?",
    "How do I compress files into a zip archive with zipfile?",
    "How do I sort and merge lists with heapq and bisect?",
    "How do I write rows to a CSV file and read them back?",
    "How do I store records in an sqlite3 database and query them?",
)
