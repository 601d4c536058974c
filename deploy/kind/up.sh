#!/usr/bin/env bash
# For machines with Docker and kind: a 3-zone x 2-rack kind cluster, the rebalancer image built
# and loaded into it, the rebalancer installed in dry-run, and a chatty demo app.
#
#   PROMETHEUS_URL=http://prometheus.monitoring.svc:9090 deploy/kind/up.sh
#
# The rebalancer needs pod-to-pod traffic from Prometheus (Cilium Hubble or Istio metrics); until
# PROMETHEUS_URL reaches one that has them, every cycle is skipped as `unreachable` or `empty`
# and nothing is planned, which is the safe behaviour.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cluster=topology-rebalancer
image=topology-rebalancer:0.1.0
prometheus=${PROMETHEUS_URL:-http://prometheus-operated.monitoring.svc:9090}

for tool in docker kind kubectl; do
    command -v "$tool" >/dev/null || { echo "up.sh needs $tool on PATH" >&2; exit 1; }
done

kind create cluster --config "$here/cluster.yaml"
docker build -t "$image" "$root"
kind load docker-image "$image" --name "$cluster"
kubectl --context "kind-$cluster" apply -k "$root/deploy/overlays/dry-run"
kubectl --context "kind-$cluster" -n topology-rebalancer set env deployment/topology-rebalancer \
    PROMETHEUS_URL="$prometheus"
kubectl --context "kind-$cluster" apply -f "$here/demo-app.yaml"
kubectl --context "kind-$cluster" -n topology-rebalancer rollout status deployment/topology-rebalancer
echo "installed in dry-run; watch it with:"
echo "  kubectl --context kind-$cluster -n topology-rebalancer logs -f deployment/topology-rebalancer"
echo "  kubectl --context kind-$cluster -n demo get events --field-selector reason=WouldEvict"
