#!/usr/bin/env bash
# build.sh builds the binaries of the local stack from the Go module proxy,
# into a cache outside git, keyed by a hash of the pinned versions. A warm run
# (nothing pinned changed) only checks a stamp file and prints the directory.
#
# Prints the bin directory on stdout; progress goes to stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"

# The key covers what pins versions, not this script: a binary added here is
# built on its own, without rebuilding the rest.
key=$(cat "$here/versions.env" "$here"/tools/*/go.mod "$here"/tools/*/go.sum "$here"/tools/*/*.go | sha256sum | cut -c1-16)
cache=${FLUXD_STACK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fluxd-stack}
dir=$cache/$key
bin=$dir/bin
binaries=(etcd crane kwok grpcurl kube-apiserver kube-controller-manager kube-scheduler kubectl)
# The real node's binaries (kubelet, the pause sandbox) come from a module of
# their own, stack/node, with a key of their own: they build beside a warm
# control plane without rebuilding it, and are linked into $bin.
nodekey=$(cat "$here/versions.env" "$here"/node/go.mod "$here"/node/go.sum "$here"/node/*.go "$here"/node/*/*.go | sha256sum | cut -c1-16)
nodebin=$cache/node-$nodekey/bin
nodebinaries=(kubelet pause)
complete() {
	local b
	for b in "${binaries[@]}"; do [ -x "$bin/$b" ] || return 1; done
	for b in "${nodebinaries[@]}"; do
		[ -x "$nodebin/$b" ] && [ "$(readlink "$bin/$b")" = "$nodebin/$b" ] || return 1
	done
	[ -f "$dir/kwok-stages/.complete" ]
}
if complete; then
	echo "$bin"
	exit 0
fi
mkdir -p "$bin" "$dir/kwok-stages"
log() { printf 'stack build: %s\n' "$*" >&2; }
start=$(date +%s)

export GOFLAGS=-buildvcs=false CGO_ENABLED=0

gi() { # go install PKG@VERSION into $bin, unless already there
	local name=$1 pkg=$2
	[ -x "$bin/$name" ] && return 0
	log "installing $pkg"
	GOBIN=$bin go install -trimpath -ldflags='-s -w' "$pkg"
}

kube() { # kube NAME [MODULE_DIR OUT_DIR]
	local name=$1 mod=${2:-$here/tools/kube} out=${3:-$bin} minor=${KUBE_VERSION#v1.}
	minor=${minor%%.*}
	[ -x "$out/$name" ] && return 0
	log "building $name $KUBE_VERSION (cold: minutes)"
	(cd "$mod" && go build -trimpath -o "$out/$name" \
		-ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean" \
		"k8s.io/kubernetes/cmd/$name")
}

if [ ! -x "$bin/etcd" ]; then
	log "building etcd $ETCD_VERSION"
	(cd "$here/tools/etcd" && go build -trimpath -ldflags='-s -w' -o "$bin/etcd" .)
fi
gi crane "github.com/google/go-containerregistry/cmd/crane@$CRANE_VERSION"
gi kwok "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
gi grpcurl "github.com/fullstorydev/grpcurl/cmd/grpcurl@$GRPCURL_VERSION"
kube kube-apiserver
kube kube-controller-manager
kube kube-scheduler
kube kubectl

mkdir -p "$nodebin"
kube kubelet "$here/node" "$nodebin"
if [ ! -x "$nodebin/pause" ]; then
	log "building pause"
	(cd "$here/node" && go build -trimpath -ldflags='-s -w' -o "$nodebin/pause" ./pause)
fi
for b in "${nodebinaries[@]}"; do ln -sfn "$nodebin/$b" "$bin/$b"; done

# kwok refuses to start without Stage configs; the stock ones ship in its module.
kwokdir=$(go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
for s in node/fast node/heartbeat pod/fast; do
	for f in "$kwokdir/kustomize/stage/$s"/*.yaml; do
		case $f in */kustomization.yaml) continue ;; esac
		cp "$f" "$dir/kwok-stages/$(echo "$s" | tr / -)-$(basename "$f")"
	done
done
chmod -R u+w "$dir/kwok-stages"
touch "$dir/kwok-stages/.complete"
complete || { log "some binaries are missing from $bin"; exit 1; }
log "done in $(($(date +%s) - start))s: $bin"
echo "$bin"
