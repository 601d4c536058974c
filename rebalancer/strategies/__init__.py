"""Strategy plugins: each finds bad placements of one kind and proposes moves; none evicts."""
