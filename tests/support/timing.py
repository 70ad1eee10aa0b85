"""Time bounds that hold on a busy machine (issue 43).

`make test` failed for a newcomer on a 2-core machine at load 9: a test compared two wall-clock figures that load
moves apart. The rule for every test that compares a duration:
- a check that some work is fast measures CPU time (`cpu_seconds`), which load does not stretch;
- a check that something ends before a deadline, or before a hang or a timeout would have ended it, leaves
  `LOAD_SLACK_S` between what a quiet machine takes and the figure a failure would show;
- a check that one figure covers another compares figures of the same span (never a part measured after the
  whole was read), or counts (attempts, requests) instead of seconds.
"""

from __future__ import annotations

import time

LOAD_SLACK_S = 5.0  # what a 2-core machine running a second test suite adds to a step that is quick when quiet


def cpu_seconds() -> float:
    """The CPU time of this process (all its threads): what a speed check measures, as load does not stretch it."""
    return time.process_time()
