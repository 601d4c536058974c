"""The test harness, not packaged: the local control plane, the traffic exporter, faults, soak,
trials, synthetic clusters and the demo, for tests/, bench/ and the make targets only."""
