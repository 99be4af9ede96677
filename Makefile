# fluxd's Makefile. The two commands a newcomer needs:
#   make up     build everything and run fluxd on the local stack
#   make test   run every test, on the real local stack
SHELL := /bin/bash
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/fluxd/fluxd/internal/version.Version=$(VERSION)

.PHONY: all build static image deps stack up restart-fluxd down test e2e-durations test-postgres test-unit generate check-generate docs vet bench bench-registry bench-api bench-scale bench-fleet bench-automation fuzz fuzz-ci clean

all: build

## deps: install the Debian packages the stack needs, when missing
deps:
	@hack/deps.sh

## build: put fluxd and fluxctl in ./bin
build:
	go build -ldflags '$(LDFLAGS)' -o bin/fluxd ./cmd/fluxd
	go build -ldflags '$(LDFLAGS)' -o bin/fluxctl ./cmd/fluxctl

## static: statically linked fluxd and fluxctl in $(STATIC_DIR), for the image
## (fluxd links SQLite with cgo, statically: see README, Container image)
STATIC_DIR ?= bin/static
## kustomize_disable_go_plugin_support: kustomize's Go-plugin loader is the
## one user of Go's plugin package (dlopen), which a static binary cannot use;
## without the tag the link warns about dlopen on every build.
STATIC_TAGS := netgo osusergo sqlite_omit_load_extension kustomize_disable_go_plugin_support
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
static:
	CGO_ENABLED=1 go build -trimpath -tags '$(STATIC_TAGS)' -ldflags '-s -w -linkmode external -extldflags -static $(LDFLAGS)' -o $(STATIC_DIR)/fluxd ./cmd/fluxd
	CGO_ENABLED=0 go build -trimpath -ldflags '-s -w $(LDFLAGS)' -o $(STATIC_DIR)/fluxctl ./cmd/fluxctl

## image: build fluxd's OCI image (no Docker needed) and push it to IMAGE,
## by default the local stack's registry ($$REGISTRY/fluxd:$(VERSION) from .stack/env)
image: static
	@image='$(IMAGE)'; \
	if [ -z "$$image" ]; then \
		registry=$$( [ -f .stack/env ] && . .stack/env && echo "$$REGISTRY"); \
		if [ -z "$$registry" ]; then \
			echo "make image: no IMAGE to push to and no local stack: set IMAGE=registry.example/fluxd:tag, or run 'make up' first" >&2; exit 1; \
		fi; \
		image="$$registry/fluxd:$(VERSION)"; \
		echo "pushing to the local stack's registry (REGISTRY in .stack/env; is 'make up' running?)" >&2; \
	fi; \
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) go run ./hack/image --fluxd $(STATIC_DIR)/fluxd --fluxctl $(STATIC_DIR)/fluxctl \
		--version '$(VERSION)' --revision "$$(git rev-parse HEAD 2>/dev/null)" --image "$$image"

## stack: build the local stack's binaries (cached; cold ~10 min, warm seconds)
stack: deps
	@stack/build.sh >/dev/null

## up: build, start the local stack and fluxd, print what to type next
## (DB=postgres: fluxd's records in a PostgreSQL server the stack starts)
## (the real node runs fluxd in a pod from the static build; FLUXD_STACK_REAL_NODE=0: a process on fake nodes only)
up: deps build static
	@bin=$$(stack/build.sh) && DB=$(DB) VERSION=$(VERSION) STATIC_DIR=$(STATIC_DIR) go run ./hack/stack up "$$bin" bin/fluxd

## restart-fluxd: stop the demo's fluxd with SIGTERM and start it again on its state
## (in a pod: the pod is deleted and the Deployment's next one starts on the same state)
## (ARGS="--flag=value ...": flags added to the fluxd process's, and kept for the next restart)
restart-fluxd:
	@go run ./hack/stack restart-fluxd $(ARGS)

## down: stop everything 'make up' started
down:
	@go run ./hack/stack down

## test: every test, the end-to-end ones as SHARDS processes side by side
## (default 3), each on a stack of its own, the tests dealt out by
## e2e/testdata/durations.tsv (hack/test.sh, hack/e2eshard); then each
## package's and shard's time, slowest first, and the 15 slowest end-to-end
## tests (the whole output is kept in .bin/test.log), with go test's exit
## status. PKGS narrows it: make test PKGS=./web
test: deps
	@PKGS='$(PKGS)' SHARDS='$(SHARDS)' hack/test.sh

## e2e-durations: run the end-to-end tests and, when they pass, keep each
## test's time in e2e/testdata/durations.tsv, the table make test deals the
## tests out by
e2e-durations: deps
	@PKGS=./e2e SHARDS='$(SHARDS)' hack/test.sh && cp .bin/e2e-durations.tsv e2e/testdata/durations.tsv && \
	echo "e2e/testdata/durations.tsv: $$(grep -vc '^#' e2e/testdata/durations.tsv) tests"

## test-postgres: the end-to-end tests again, every fluxd on PostgreSQL
test-postgres: deps
	@bin=$$(stack/build.sh) && FLUXD_STACK_BIN="$$bin" FLUXD_STACK_DB=postgres go test -count=1 -timeout 75m ./e2e/

## test-unit: only the tests that need no stack
test-unit:
	go test -short -count=1 ./...

## torture: the randomized torture suite on the local stack (docs/torture.md):
## two replicas on PostgreSQL, STEPS random operations drawn from SEED (default:
## a fresh seed, printed), then seven checks; ENFORCE lists the checks whose
## violations fail the run (default all: abcdefg), the others are reported
STEPS ?= 60
ENFORCE ?= abcdefg
.PHONY: torture
torture: deps
	@bin=$$(stack/build.sh) && FLUXD_STACK_BIN="$$bin" FLUXD_TORTURE_SEED='$(SEED)' FLUXD_TORTURE_STEPS='$(STEPS)' \
		FLUXD_TORTURE_ENFORCE='$(ENFORCE)' go test -count=1 -run '^TestTorture$$' -timeout 60m -v ./e2e/

## vet: go vet
vet:
	go vet ./...

## generate: regenerate the protobuf code with pinned generators, and the Helm chart's templates from deploy/
generate:
	hack/generate.sh
	go test -count=1 -run '^TestChartIsGenerated$$' ./deploy -update

## check-generate: fail when the checked-in protobuf code, the Helm chart or the generated docs are stale
check-generate:
	hack/generate.sh --check
	go test -count=1 -run '^TestChart' ./deploy
	go test -count=1 -run 'TestCLIReference|TestFlagReference' ./cmd/fluxctl ./cmd/fluxd

## docs: regenerate docs/cli.md and docs/fluxd-flags.md from the commands' own flags
docs:
	go test -count=1 -run TestCLIReference ./cmd/fluxctl -update
	go test -count=1 -run TestFlagReference ./cmd/fluxd -update

## bench: run the benchmarks 6 times and summarise them with benchstat
BENCHSTAT_VERSION := v0.0.0-20260908200009-22c9c6c9d4da
bench:
	@mkdir -p .bin/tools
	@[ -x .bin/tools/benchstat ] || GOBIN=$(CURDIR)/.bin/tools go install golang.org/x/perf/cmd/benchstat@$(BENCHSTAT_VERSION)
	go test -run '^$$' -bench . -benchmem -count 6 $$(go list ./... | grep -v /e2e) | tee .bin/bench.txt
	.bin/tools/benchstat .bin/bench.txt

## bench-registry: the registry scan benchmark, both set-ups, a day beside a
## Flux v1 model, and the first list-images of a big repository (see README, Performance)
bench-registry:
	go test -run '^$$' -bench 'BenchmarkScan|BenchmarkCacheMemory' -benchtime 1x ./registry/oci/
	go test -run '^$$' -bench 'BenchmarkScan' -benchtime 1x ./registry/oci/ -args -scan.repos 100 -scan.tags 1000
	go test -run '^$$' -bench 'BenchmarkScanDay' -benchtime 1x ./registry/oci/
	go test -run '^$$' -bench 'BenchmarkListImagesCold' -benchtime 1x ./daemon/

## bench-api: ListServices of 1,000 workloads under load (50 workers) on the local
## stack, side by side with the kube-apiserver's cached LIST (vegeta, JSON API;
## a Go pool and ghz over gRPC), BENCH_API_DURATION each (20s), this tree's fluxd
## beside BENCH_API_BASE's (default 784afeb^, the commit before the kept view)
BENCH_API_BASE ?= 784afeb^
GHZ_VERSION := v0.121.0
bench-api: stack
	@mkdir -p .bin/tools
	@[ -x .bin/tools/ghz ] || GOBIN=$(CURDIR)/.bin/tools go install github.com/bojand/ghz/cmd/ghz@$(GHZ_VERSION)
	@rm -rf .bin/base-src && git worktree add -q --detach .bin/base-src $(BENCH_API_BASE) && \
		(cd .bin/base-src && go build -o $(CURDIR)/.bin/fluxd-base ./cmd/fluxd); status=$$?; \
		git worktree remove --force .bin/base-src; exit $$status
	FLUXD_STACK_BIN=$$(stack/build.sh) GHZ=$(CURDIR)/.bin/tools/ghz FLUXD_BASE=$(CURDIR)/.bin/fluxd-base \
		FLUXD_BASE_REV=$$(git rev-parse --short $(BENCH_API_BASE)) \
		go test -run '^$$' -bench BenchmarkAPILoad -benchtime 1x -timeout 30m ./e2e/

## bench-scale: fluxd at each size of BENCH_SCALE (workloads; 1,000 and 10,000)
## in one run: memory, list-services, a dry-run release, an automator pass, syncs
BENCH_SCALE ?= 1000,10000
bench-scale: stack
	FLUXD_STACK_BIN=$$(stack/build.sh) BENCH_SCALE=$(BENCH_SCALE) go test -run '^$$' -bench BenchmarkScale -benchtime 1x -timeout 180m ./e2e/

## bench-fleet: BENCH_FLEET_INSTANCES fluxds (5) of BENCH_FLEET workloads each (2,000)
## on one PostgreSQL store: the store's load, its tables' growth, each fluxd's RSS and CPU
BENCH_FLEET ?= 2000
BENCH_FLEET_INSTANCES ?= 5
## the deployment controller's API rate: at its default 20/s it takes about 18 min
## to observe 10,000 new Deployments, and every release's rollout waits behind it
BENCH_FLEET_CONTROLLER_QPS ?= 200
bench-fleet: stack
	FLUXD_STACK_BIN=$$(stack/build.sh) FLUXD_STACK_CONTROLLER_QPS=$(BENCH_FLEET_CONTROLLER_QPS) BENCH_FLEET=$(BENCH_FLEET) BENCH_FLEET_INSTANCES=$(BENCH_FLEET_INSTANCES) go test -run '^$$' -bench BenchmarkFleet -benchtime 1x -timeout 180m ./e2e/

## bench-automation: push → commit → rollout latency of automation on the local stack, 20 pushes
bench-automation: stack
	FLUXD_STACK_BIN=$$(stack/build.sh) go test -run '^$$' -bench BenchmarkAutomationLatency -benchtime 20x ./e2e/

## fuzz: every Fuzz function in the repository, FUZZTIME each (default 1m);
## a failing input is written to the package's testdata/fuzz/FuzzXxx/
## (commit it: it then runs with the unit tests)
FUZZTIME ?= 1m
fuzz:
	@failed=; for dir in $$(go list -f '{{.Dir}}' ./... | grep -v /e2e); do \
		grep -qs '^func Fuzz' $$dir/*_test.go || continue; \
		pkg=./$${dir#$(CURDIR)/}; \
		for fn in $$(go test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			echo "== $$pkg $$fn for $(FUZZTIME)"; \
			go test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) $$pkg || failed="$$failed $$pkg.$$fn"; \
		done; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzzers that failed:$$failed"; exit 1; fi

## fuzz-ci: every fuzzer for 5,000 inputs, for CI (a count, not a time: a
## time budget fails with "context deadline exceeded" on a loaded machine
## when the baseline corpus takes longer than the budget)
fuzz-ci:
	@$(MAKE) --no-print-directory fuzz FUZZTIME=5000x

clean:
	rm -rf bin
