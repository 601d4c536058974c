"""Test kit: builders of Kubernetes-shaped objects and Prometheus answers, for tests and examples.

Public on purpose (like kopf.testing): users who write their own strategies need the same builders.
"""
