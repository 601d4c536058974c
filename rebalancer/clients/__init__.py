"""The network edge: the only modules that talk to the Kubernetes API or Prometheus."""
