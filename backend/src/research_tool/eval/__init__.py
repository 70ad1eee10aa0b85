"""Measurements of retrieval and research quality on real, public data sets (not part of the test suite)."""
