#!/usr/bin/env bash
# generate.sh regenerates the checked-in protobuf code with pinned generator
# versions, after linting the .proto files. With --check it fails when the
# checked-in code differs from what the generators produce.
set -euo pipefail
cd "$(dirname "$0")/.."
BUF_VERSION=v1.75.0
PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2
PROTOC_GEN_GRPC_GATEWAY_VERSION=v2.33.0

tools=$PWD/.bin/tools
stamp=$tools/.versions
want="$BUF_VERSION $PROTOC_GEN_GO_VERSION $PROTOC_GEN_GO_GRPC_VERSION $PROTOC_GEN_GRPC_GATEWAY_VERSION"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
	echo "generate: installing buf $BUF_VERSION, protoc-gen-go $PROTOC_GEN_GO_VERSION, protoc-gen-go-grpc $PROTOC_GEN_GO_GRPC_VERSION, protoc-gen-grpc-gateway $PROTOC_GEN_GRPC_GATEWAY_VERSION" >&2
	mkdir -p "$tools"
	GOBIN=$tools CGO_ENABLED=0 go install "github.com/bufbuild/buf/cmd/buf@$BUF_VERSION"
	GOBIN=$tools go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION"
	GOBIN=$tools go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"
	GOBIN=$tools go install "github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-grpc-gateway@$PROTOC_GEN_GRPC_GATEWAY_VERSION"
	echo "$want" >"$stamp"
fi

"$tools/buf" lint
if [ "${1:-}" = --check ]; then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	cp -r proto "$tmp/before"
	"$tools/buf" generate
	if ! diff -r "$tmp/before" proto >/dev/null; then
		diff -r "$tmp/before" proto | head -20 >&2
		cp -r "$tmp/before/." proto/
		echo "generate: the checked-in code in proto/ is stale; run 'make generate' and commit the result" >&2
		exit 1
	fi
	echo "generate: proto/ is up to date" >&2
else
	"$tools/buf" generate
fi
