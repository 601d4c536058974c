"""`rebalancer simulate`: the real planner, cycle after cycle, on a simulated cluster."""
