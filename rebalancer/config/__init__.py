"""The policy: typed settings, validated once, and their generated reference."""
