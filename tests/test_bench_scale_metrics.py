"""The scale benchmark reads the server's loop-lag and gc-pause histograms from /metrics."""

from __future__ import annotations

import time

from research_tool.bench.process_tree import machine_cpu_seconds
from research_tool.bench.scale import bucket_counts, machine_use

BEFORE = """# TYPE research_event_loop_lag_seconds histogram
research_event_loop_lag_seconds_bucket{le="0.001"} 5.0
research_event_loop_lag_seconds_bucket{le="0.01"} 10.0
research_event_loop_lag_seconds_bucket{le="0.1"} 10.0
research_event_loop_lag_seconds_bucket{le="+Inf"} 10.0
research_gc_pause_seconds_bucket{generation="0",le="0.001"} 50.0
research_gc_pause_seconds_bucket{generation="0",le="+Inf"} 50.0
research_gc_pause_seconds_bucket{generation="2",le="0.001"} 0.0
research_gc_pause_seconds_bucket{generation="2",le="+Inf"} 0.0
"""
AFTER = """research_event_loop_lag_seconds_bucket{le="0.001"} 85.0
research_event_loop_lag_seconds_bucket{le="0.01"} 100.0
research_event_loop_lag_seconds_bucket{le="0.1"} 109.0
research_event_loop_lag_seconds_bucket{le="+Inf"} 110.0
research_gc_pause_seconds_bucket{generation="0",le="0.001"} 90.0
research_gc_pause_seconds_bucket{generation="0",le="+Inf"} 90.0
research_gc_pause_seconds_bucket{generation="2",le="0.001"} 1.0
research_gc_pause_seconds_bucket{generation="2",le="+Inf"} 3.0
"""


def test_quantiles_of_the_samples_taken_between_two_scrapes() -> None:
    lag = bucket_counts(AFTER, "research_event_loop_lag_seconds") - bucket_counts(
        BEFORE, "research_event_loop_lag_seconds"
    )
    assert lag.total == 100
    assert lag.quantile(0.5) == 0.001  # 80 of the 100 new samples under 1 ms
    assert lag.quantile(0.95) == 0.1
    assert lag.quantile(0.999) == 0.1  # in +Inf: the largest finite bound


def test_one_labelled_series_and_an_empty_histogram() -> None:
    full = bucket_counts(AFTER, "research_gc_pause_seconds", 'generation="2"')
    assert full.total == 3 and full.quantile(0.5) == 0.001
    assert bucket_counts("", "research_gc_pause_seconds").quantile(0.95) == 0.0


def test_machine_use_divides_the_cpu_seconds_between_two_readings_by_the_wall_time() -> None:
    use = machine_use((100.0, 50.0), (130.0, 60.0), 20.0)  # 30 s busy, 10 s idle over 20 s: 2 cores
    assert use == {"machine_busy_cores": 1.5, "machine_idle_cores": 0.5}
    assert machine_use((1.0, 1.0), (1.0, 1.0), 0.0) == {"machine_busy_cores": 0.0, "machine_idle_cores": 0.0}


def test_machine_cpu_seconds_grows_while_this_process_works() -> None:
    busy_before, _ = machine_cpu_seconds()
    began = time.process_time()
    while time.process_time() - began < 0.2:  # 200 ms of our own CPU: the machine's busy total must see it
        sum(range(1000))
    busy_after, _ = machine_cpu_seconds()
    # /proc/stat counts in 10 ms ticks, sampled: half the work is a margin that rounding cannot eat
    assert busy_after - busy_before >= 0.1
