"""Benchmarks: each prints its figures and writes them to bench/results/ (run by `make bench-*`)."""
