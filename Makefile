# Build, test and local-cluster targets. CI runs `make test` (see .ci/run).
#
# The tests need a real API server. There is no Docker and no binary download
# here, so kube-apiserver is compiled from the pinned tools module hack/kube
# and etcd comes from Debian/Ubuntu's etcd-server package.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build

BIN := $(CURDIR)/bin
KUBE_VERSION := v1.34.3
KUBE_LDFLAGS := -X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 \
	-X k8s.io/component-base/version.gitMinor=34
# etcd as installed by the etcd-server package; override to use another one.
ETCD ?= /usr/bin/etcd
# apt-get needs root; GitHub runners are not root but have passwordless sudo.
SUDO := $(shell if [ "$$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then echo sudo; fi)

GO_TEST_FLAGS ?= -count=1 -timeout 30m

.PHONY: build test vet bench kube-bin kube-up kube-down

build:
	go build -o bin/opm ./cmd/opm

kube-bin: bin/kube-apiserver bin/etcd

# Rebuilt only when the pinned Kubernetes version changes. `go build -o` keeps
# an up-to-date binary untouched, so touch it to keep make from retrying.
bin/kube-apiserver: hack/kube/go.mod hack/kube/go.sum
	@mkdir -p bin
	cd hack/kube && go build -ldflags "$(KUBE_LDFLAGS)" -o ../../bin/kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
	@touch $@

# The package also enables a systemd unit; it is not needed (and does not run
# here): envtest and kube-up start their own etcd.
bin/etcd:
	@mkdir -p bin
	@if [ ! -x "$(ETCD)" ]; then \
		echo "etcd not found at $(ETCD); installing the etcd-server package"; \
		$(SUDO) apt-get update; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends etcd-server; \
		[ -x "$(ETCD)" ] || { echo "etcd-server is installed but $(ETCD) is not there; set ETCD=/path/to/etcd" >&2; exit 1; }; \
	fi
	ln -sf "$(ETCD)" $@

# Leaves etcd and kube-apiserver running after make exits; state in bin/kube/.
kube-up: kube-bin
	go run ./hack/kubeup up -bin "$(BIN)"

kube-down:
	go run ./hack/kubeup down -bin "$(BIN)"

vet:
	go vet ./...

test: kube-bin vet
	KUBEBUILDER_ASSETS="$(BIN)" go test $(GO_TEST_FLAGS) ./...
	go test -run '^$$' -fuzz FuzzDecode -fuzztime 10s ./engine/inventory/decodefuzz

# Times opm apply against kubectl apply --server-side on a 200-object
# release (bench/, behind the "bench" build tag so `make test` skips it).
# Local-directory mode (no package argument) lets the result lines through.
bench: kube-bin
	cd bench && KUBEBUILDER_ASSETS="$(BIN)" go test -tags bench -count=1 -run '^TestBench' -timeout 20m
