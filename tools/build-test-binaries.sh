#!/usr/bin/env bash
# Builds the real control plane the tests run (kube-apiserver, kube-controller-manager,
# kube-scheduler, etcd and kwok), and kubectl and helm for the deploy/ and chart tests, from the Go modules pinned under tools/, into a cache outside the
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
        -o "$bin/$name.partial.$$" "$package")
    mv "$bin/$name.partial.$$" "$bin/$name"  # per process: two builds at once must not collide
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
# helm, for the chart's tests; named by version, so a new pin is built beside the old one.
helm_version=$(version_of helm helm.sh/helm/v4)
build helm "helm-$helm_version" helm.sh/helm/v4/cmd/helm \
    "-X helm.sh/helm/v4/internal/version.version=$helm_version"
ln -sf "helm-$helm_version" "$bin/helm"

# kwok v0.8 has no built-in stages: take the fast node and pod lifecycles its module ships, but
# not pod-complete, which would end Job pods (training gangs) at once.
if [[ ! -f "$bin/stages.yaml" ]]; then
    stages=$(cd "$here/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage
    for file in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
        pod/fast/pod-ready.yaml pod/fast/pod-delete.yaml; do
        printf -- '---\n'
        cat "$stages/$file"
    done >"$bin/stages.yaml.partial.$$"
    mv "$bin/stages.yaml.partial.$$" "$bin/stages.yaml"
fi
# CRDs that deploy/ uses, so it can be applied to the test API server: the Prometheus Operator's
# ServiceMonitor and PrometheusRule, and cert-manager's Issuer and Certificate. Both projects ship
# them in their Go modules, which the module proxy serves.
# fetch_crds [PREFIX] MODULE@VERSION DIRECTORY_IN_MODULE FILE...
fetch_crds() {
    local prefix=crds
    if [[ $1 != *@* ]]; then
        prefix=$1
        shift
    fi
    local module=$1 directory=$2
    shift 2
    local target="$bin/$prefix-${module##*/}"
    if [[ -d "$target" ]]; then
        return
    fi
    say "fetching CRDs from $module"
    local source_dir
    source_dir=$(cd "$here/kube" && go mod download -json "$module" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
    # Per process, as the binaries: another build may be fetching the same CRDs. Whichever
    # renames first wins; the other's copy, identical, is dropped.
    local partial="$target.partial.$$"
    mkdir -p "$partial"
    for file in "$@"; do
        cp "$source_dir/$directory/$file" "$partial/"
    done
    mv -T "$partial" "$target" 2>/dev/null || { rm -rf "$partial"; [[ -d "$target" ]]; }
}
fetch_crds github.com/prometheus-operator/prometheus-operator@v0.89.0 example/prometheus-operator-crd \
    monitoring.coreos.com_servicemonitors.yaml monitoring.coreos.com_prometheusrules.yaml
fetch_crds github.com/cert-manager/cert-manager@v1.21.2 deploy/crds \
    cert-manager.io_issuers.yaml cert-manager.io_certificates.yaml
# The gang schedulers' and gang owners' CRDs, for the test that a cycle leaves their gangs to
# them: each project's own files, from its Go module (kept apart from deploy/'s, which every
# overlay test applies).
fetch_crds gang-crds sigs.k8s.io/kueue@v0.17.0 config/components/crd/bases \
    kueue.x-k8s.io_workloads.yaml kueue.x-k8s.io_topologies.yaml \
    kueue.x-k8s.io_resourceflavors.yaml kueue.x-k8s.io_clusterqueues.yaml \
    kueue.x-k8s.io_localqueues.yaml
fetch_crds gang-crds volcano.sh/volcano@v1.15.0 config/crd/volcano/bases \
    scheduling.volcano.sh_podgroups.yaml batch.volcano.sh_jobs.yaml \
    topology.volcano.sh_hypernodes.yaml
fetch_crds gang-crds github.com/NVIDIA/KAI-scheduler@v0.12.0 deployments/kai-scheduler/crds \
    scheduling.run.ai_podgroups.yaml kai.scheduler_topologies.yaml
fetch_crds gang-crds sigs.k8s.io/jobset@v0.12.0 config/components/crd/bases \
    jobset.x-k8s.io_jobsets.yaml
fetch_crds gang-crds sigs.k8s.io/lws@v0.7.0 config/crd/bases \
    leaderworkerset.x-k8s.io_leaderworkersets.yaml
fetch_crds gang-crds sigs.k8s.io/scheduler-plugins@v0.34.7 config/crd/bases \
    scheduling.x-k8s.io_podgroups.yaml
fetch_crds gang-crds github.com/koordinator-sh/koordinator@v1.8.0 config/crd/bases \
    scheduling.sigs.k8s.io_podgroups.yaml
echo "$bin"
