"""The network edge: the modules that talk to the Kubernetes API or Prometheus (with the webhook
server, which also answers the API server)."""
