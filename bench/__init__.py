"""Benchmarks: each measures Playline against a reference in the same run (BENCHMARKS.md)."""
