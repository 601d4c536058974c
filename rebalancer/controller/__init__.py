"""`rebalancer run`: the cycle every interval, acting as the policy's mode says."""
