"""The planning stage: from candidates to a safe plan, and the state that outlives a cycle."""
