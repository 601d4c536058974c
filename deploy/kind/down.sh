#!/usr/bin/env bash
# Deletes the kind cluster up.sh made.
set -euo pipefail
kind delete cluster --name topology-rebalancer
