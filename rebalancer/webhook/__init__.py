"""The migrate-mode admission webhook that steers each replacement to its target domain."""
