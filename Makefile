# Build, test and local-cluster targets. CI runs `make test` (see .ci/run).
#
# The tests need a real cluster. There is no Docker and no binary download
# here, so kube-apiserver, kube-controller-manager and kube-scheduler are
# compiled from the pinned tools module hack/kube, kwok (simulated nodes and
# pods) from hack/kwok, and etcd (v3.6.4, what Kubernetes v1.34 ships with)
# from hack/etcd.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build

BIN := $(CURDIR)/bin
KUBE_VERSION := v1.34.3
KUBE_LDFLAGS := -X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 \
	-X k8s.io/component-base/version.gitMinor=34

GO_TEST_FLAGS ?= -count=1 -timeout 30m

# What `opm version` reports for a local build (release builds get the same
# variables from .goreleaser.yaml).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
# The commit's date, not the build's: rebuilding the same commit gives the
# same binary, so render fingerprints (which cover opm's build ID) and the
# render cache survive a local rebuild, as goreleaser's CommitDate does.
DATE ?= $(shell TZ=UTC git log -1 --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd 2>/dev/null)
BUILDINFO := github.com/opmodel/pipeline/buildinfo
LDFLAGS := -X $(BUILDINFO).version=$(VERSION) -X $(BUILDINFO).commit=$(COMMIT) -X $(BUILDINFO).date=$(DATE)

.PHONY: build test race vet docs bench kube-bin kube-up kube-down daggercheck dagger-gomod actionlint staticcheck release-check

build:
	go build -ldflags "$(LDFLAGS)" -o bin/opm ./cmd/opm

KUBE_CMDS := kube-apiserver kube-controller-manager kube-scheduler

kube-bin: $(addprefix bin/,$(KUBE_CMDS)) bin/kwok bin/etcd

# Rebuilt only when the pinned versions change. `go build -o` keeps an
# up-to-date binary untouched, so touch it to keep make from retrying. The
# three Kubernetes commands share most packages: after the first, the others
# take a minute or two.
$(addprefix bin/,$(KUBE_CMDS)): bin/%: hack/kube/go.mod hack/kube/go.sum
	@mkdir -p bin
	cd hack/kube && go build -ldflags "$(KUBE_LDFLAGS)" -o ../../bin/$* k8s.io/kubernetes/cmd/$*
	@touch $@

# kwok needs newer k8s.io libraries than k8s.io/kubernetes v1.34, hence its
# own tools module, and Go >= 1.26 (an older go fetches that toolchain
# itself unless GOTOOLCHAIN=local).
bin/kwok: hack/kwok/go.mod hack/kwok/go.sum
	@mkdir -p bin
	cd hack/kwok && go build -o ../../bin/kwok sigs.k8s.io/kwok/cmd/kwok
	@touch $@

# etcd 3.6, as kind and Kubernetes v1.34 run it: an API server on it serves
# consistent LISTs from its watch cache (etcd answers its progress
# requests), as on a real cluster. On Debian's 3.4 every LIST went to etcd:
# a diff's label scan of a 1 000-object release cost the API server and
# etcd 0.9 s of CPU there, 0.5-0.7 s on 3.6.
bin/etcd: hack/etcd/go.mod hack/etcd/go.sum
	@mkdir -p bin
	@rm -f $@ # it was once a link to Debian's etcd: never build through it
	cd hack/etcd && go build -o ../../bin/etcd go.etcd.io/etcd/server/v3
	@touch $@

# Leaves the control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kwok) running after make exits; state in bin/kube/.
kube-up: kube-bin
	go run ./hack/kubeup up -bin "$(BIN)"

kube-down:
	go run ./hack/kubeup down -bin "$(BIN)"

vet:
	go vet ./...
	# The bench is built only with its tag: vet it too, so an API change
	# that breaks it fails here rather than in the next `make bench`.
	go vet -tags bench ./bench

# Regenerates docs/cli.md from the cobra command tree; `make test` fails
# (TestCLIReference) when it is stale.
docs:
	go test ./cmd/opm -count=1 -run '^TestCLIReference$$' -update

# goreleaser, pinned in its own tools module (hack/goreleaser) and rebuilt
# only when the pin changes: a cold build compiles ~1100 modules.
bin/goreleaser: hack/goreleaser/go.mod hack/goreleaser/go.sum
	@mkdir -p bin
	cd hack/goreleaser && go build -o ../../bin/goreleaser github.com/goreleaser/goreleaser/v2
	@touch $@

# Validates .goreleaser.yaml with goreleaser's own checker.
release-check: bin/goreleaser
	bin/goreleaser check

test: kube-bin vet staticcheck daggercheck actionlint release-check race
	KUBEBUILDER_ASSETS="$(BIN)" go test $(GO_TEST_FLAGS) ./...
	# A count, not a duration: go1.26's fuzz coordinator can report its own
	# -fuzztime deadline as a failure (golang/go#75804, fixed in go1.27).
	go test -run '^$$' -fuzz FuzzDecode -fuzztime 10000x ./engine/inventory/decodefuzz

# The race detector on what runs on several goroutines in one process: a
# review's renders, chunks and cache lookups, and the caches they share. A
# data race there once passed every test without it. The whole suite under
# -race takes ten minutes here; these tests cover every concurrent path of
# a review (the head parsed while the base is read, one chunk shared by
# both cores, chunks one per core, shards, the cache read and written by
# concurrent reviews).
RACE_TESTS := ^(TestScanAheadIsTheScan|TestReviewOfAGroup|TestReviewParallelEqualsSequential|TestReviewParallelEqualsSequentialOnEdgeCases|TestShardsMergeIntoTheReview|TestWarmCacheReviewsTheSame|TestChunkedReviewKeepsCachedPairs|TestConcurrentReviewsShareTheCache)$$
#
# Render's releases, and one release's components (engine/render/share.go),
# run on several goroutines, each with a CUE context of its own. Sharing one
# context's values across goroutines races inside cuelang.org/go v0.17.1's
# evaluator (its docs say values are safe for concurrent use; rendering one
# release's components on two goroutines of one context gave 113 race
# reports in the first three tests, docs/performance.md): they guard
# whoever tries again. The shared renders' differential tests run here too.
RENDER_RACE_TESTS := ^(TestParallelRenderEqualsSequential|TestEmbeddedBlueprint|TestReferencesAreChecked|TestSharedRender.*|TestCutLoad.*|TestComponentCache.*|TestMovedComponents.*)$$
race: kube-bin
	KUBEBUILDER_ASSETS="$(BIN)" go test -race -count=1 -run '$(RACE_TESTS)' ./pipeline
	go test -race -count=1 ./engine/cache ./engine/rendercache ./engine/fingerprint ./engine/workers
	go test -race -count=1 -run '$(RENDER_RACE_TESTS)' ./engine/render

# The Dagger module as the pinned engine loads it (hack/daggercheck, its own
# module so Dagger's dependencies stay out of go.mod). The Go SDK's code
# generator is built from the github.com/dagger/dagger version that
# hack/daggercheck/go.mod pins, and rebuilt only when that pin changes. The
# checksum database does not serve github.com/dagger/dagger; go.sum holds its
# hash, and GONOSUMDB covers a go.sum update.
DAGGERCHECK_ENV := GONOSUMDB=github.com/dagger/dagger

bin/dagger-codegen: hack/daggercheck/go.mod hack/daggercheck/go.sum
	@mkdir -p bin
	cd hack/daggercheck && $(DAGGERCHECK_ENV) go build -o ../../bin/dagger-codegen github.com/dagger/dagger/cmd/codegen
	@touch $@

daggercheck: bin/dagger-codegen
	cd hack/daggercheck && $(DAGGERCHECK_ENV) go vet ./... && $(DAGGERCHECK_ENV) go test -count=1 ./...
	cd hack/daggercheck && $(DAGGERCHECK_ENV) go run . -repo ../.. -codegen ../../bin/dagger-codegen

# Rewrites dagger/go.mod and dagger/go.sum to what the engine's codegen
# (go mod tidy) leaves. sops pulls in github.com/huaweicloud's SDK, which the
# checksum database does not serve either: writing its hash into go.sum here
# is what lets the engine (and daggercheck, without this exception) tidy.
dagger-gomod: bin/dagger-codegen
	cd hack/daggercheck && $(DAGGERCHECK_ENV),github.com/huaweicloud go run . -repo ../.. -codegen ../../bin/dagger-codegen -write-gomod

# GitHub workflows, linted by a pinned actionlint. shellcheck
# is off so the result does not depend on whether the machine has it.
ACTIONLINT_VERSION := v1.7.7
ACTIONLINT := $(BIN)/actionlint-$(ACTIONLINT_VERSION)

$(ACTIONLINT):
	@mkdir -p bin
	GOBIN="$(BIN)/.actionlint" go install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION)
	mv "$(BIN)/.actionlint/actionlint" $@ && rmdir "$(BIN)/.actionlint"

actionlint: $(ACTIONLINT)
	$(ACTIONLINT) -shellcheck= -pyflakes= .github/workflows/*.yml

# Go code, checked by a pinned staticcheck (its default checks, with the
# style checks it enables by default).
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(BIN)/staticcheck-$(STATICCHECK_VERSION)

$(STATICCHECK):
	@mkdir -p bin
	GOBIN="$(BIN)/.staticcheck" go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv "$(BIN)/.staticcheck/staticcheck" $@ && rmdir "$(BIN)/.staticcheck"

staticcheck: $(STATICCHECK)
	$(STATICCHECK) ./...

# Times opm against kubectl apply --server-side and fluxcd/pkg/ssa (the
# bench/ssa module, built by the test) on 200- and 1000-object releases,
# plus review and render scaling (bench/, behind the "bench" build tag so
# `make test` skips it).
# Local-directory mode (no package argument) lets the result lines through.
bench: kube-bin
	cd bench && KUBEBUILDER_ASSETS="$(BIN)" go test -tags bench -count=1 -run '^TestBench' -timeout 60m
