"""The cluster stage: one immutable snapshot per cycle, its topology, and the fit rules."""
