#!/usr/bin/env bash
# Builds the real control plane the tests run (kube-apiserver, kube-controller-manager,
# kube-scheduler, etcd and kwok), and kubectl for the deploy/ tests, from the Go modules pinned under tools/, into a cache outside the
# checkout keyed by version, so later runs and CI on the same machine reuse them.
#
# Progress goes to stderr; the last line on stdout is the directory that holds every binary and
# kwok's stages.yaml. The first build takes minutes and a few GB of Go module and build cache.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${TOPOLOGY_REBALANCER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/topology-rebalancer}

version_of() { (cd "$here/$1" && go list -m -f '{{.Version}}' "$2"); }
say() { printf '%s\n' "$*" >&2; }

kube_version=$(version_of kube k8s.io/kubernetes)
etcd_version=$(version_of etcd go.etcd.io/etcd/server/v3)
kwok_version=$(version_of kwok sigs.k8s.io/kwok)
bin="$cache/bin/k8s-$kube_version-etcd-$etcd_version-kwok-$kwok_version"

# build MODULE_DIR OUTPUT_NAME PACKAGE [LDFLAGS]: one binary, skipped when already cached.
build() {
    local module=$1 name=$2 package=$3 ldflags=${4:-}
    if [[ -x "$bin/$name" ]]; then
        return
    fi
    say "building $name from $package (first time only; this takes minutes)"
    local started=$SECONDS
    (cd "$here/$module" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $ldflags" \
        -o "$bin/$name.partial" "$package")
    mv "$bin/$name.partial" "$bin/$name"
    say "built $name in $((SECONDS - started))s"
}

mkdir -p "$bin"
minor=${kube_version#v1.}
minor=${minor%%.*}
kube_ldflags="-X k8s.io/component-base/version.gitVersion=$kube_version"
kube_ldflags+=" -X k8s.io/component-base/version.gitMajor=1"
kube_ldflags+=" -X k8s.io/component-base/version.gitMinor=$minor"
for component in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    build kube "$component" "k8s.io/kubernetes/cmd/$component" "$kube_ldflags"
done
build etcd etcd go.etcd.io/etcd/server/v3
build kwok kwok sigs.k8s.io/kwok/cmd/kwok

# kwok v0.8 has no built-in stages: take the fast node and pod lifecycles its module ships, but
# not pod-complete, which would end Job pods (training gangs) at once.
if [[ ! -f "$bin/stages.yaml" ]]; then
    stages=$(cd "$here/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage
    for file in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
        pod/fast/pod-ready.yaml pod/fast/pod-delete.yaml; do
        printf -- '---\n'
        cat "$stages/$file"
    done >"$bin/stages.yaml.partial"
    mv "$bin/stages.yaml.partial" "$bin/stages.yaml"
fi
# The Prometheus Operator's CRDs (ServiceMonitor, PrometheusRule), so deploy/ can be applied to the
# test API server; they ship in the operator's Go module, which the module proxy serves.
operator=github.com/prometheus-operator/prometheus-operator@v0.89.0
crds="$bin/crds-${operator##*@}"
if [[ ! -d "$crds" ]]; then
    say "fetching the Prometheus Operator CRDs from $operator"
    source_dir=$(cd "$here/kube" && go mod download -json "$operator" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
    mkdir -p "$crds.partial"
    for kind in servicemonitors prometheusrules; do
        cp "$source_dir/example/prometheus-operator-crd/monitoring.coreos.com_$kind.yaml" "$crds.partial/"
    done
    mv "$crds.partial" "$crds"
fi
echo "$bin"
