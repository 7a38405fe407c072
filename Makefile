# hotcert build and test entry points. `make test` is the one command that passes every test.
GO        ?= go
BIN_DIR   := $(CURDIR)/.bin
K8S_BIN   := $(BIN_DIR)/k8s
TM_BIN    := $(BIN_DIR)/trust-manager
IMAGE_DIR := $(BIN_DIR)/image
# The image's version and tag: the chart's appVersion, which the chart and the
# kustomize base run (hotcert.local/hotcert-controller:<appVersion>).
VERSION   ?= $(shell sed -n 's/^appVersion: *"*\([^"]*\)"*$$/\1/p' deploy/helm/hotcert-controller/Chart.yaml)
IMAGE_REPO ?= hotcert.local/hotcert-controller
TEST_FLAGS ?= -race -count=1 -timeout 30m

export KUBEBUILDER_ASSETS := $(K8S_BIN)

# Every module of the workspace (go.work). In workspace mode `./...` matches only
# the module of the current directory, so each module's tree is named.
MODULES   := $(shell $(GO) list -m -f '{{.Dir}}' 2>/dev/null)
BENCH_MOD := $(CURDIR)/bench
# The build tools' modules (make image, make release, make plots) are tested
# without the race detector: they run one goroutine around go-containerregistry,
# Helm and gzip, and under -race gzipping the controller's 57 MB binary takes
# ~80 s instead of ~2 s per image (measured here), for nothing -race could find.
TOOL_MODS := $(filter $(CURDIR)/hack/%,$(MODULES))
TOOL_TEST_FLAGS ?= $(filter-out -race,$(TEST_FLAGS))
PKGS      := $(addsuffix /...,$(filter-out $(BENCH_MOD) $(TOOL_MODS),$(MODULES)))
TOOL_PKGS := $(addsuffix /...,$(TOOL_MODS))

.PHONY: all test unit vet fmt-check tools k8s-bins trust-manager image bench demo tidy clean

all: vet test

## test: install the system tools and build the binaries the tests need (once), then run every test with -race.
test: tools k8s-bins trust-manager spire-bins vet fmt-check
	$(GO) test $(TEST_FLAGS) $(PKGS)
	$(GO) test $(TOOL_TEST_FLAGS) $(TOOL_PKGS)

## unit: run the tests without building Kubernetes binaries (tests that need them fail, never skip).
unit:
	$(GO) test $(TEST_FLAGS) $(PKGS)
	$(GO) test $(TOOL_TEST_FLAGS) $(TOOL_PKGS)

## tools: install openssl, promtool, gcc and a JDK from Debian's packages when missing.
tools:
	@hack/tools.sh

vet:
	$(GO) vet $(addsuffix /...,$(MODULES))

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

## k8s-bins: build kube-apiserver, etcd and kube-controller-manager from the Go module proxy into .bin/k8s.
k8s-bins:
	@hack/build-k8s.sh $(K8S_BIN)

## spire-bins: build spire-server and spire-agent (SPIRE, for the tests of source/spiffe and hotcert proxy --spiffe-socket) from the Go module proxy into .bin/spire.
.PHONY: spire-bins
spire-bins:
	@hack/build-spire.sh $(BIN_DIR)/spire

## trust-manager: build cert-manager's trust-manager into .bin/trust-manager, with its Bundle CRD and cert-manager's CRDs.
trust-manager:
	@hack/build-trust-manager.sh $(TM_BIN)

## image: build the hotcert-controller OCI image without a container engine into .bin/image
## (hotcert-controller.tar for kind load image-archive / docker load, oci/ an OCI layout).
image:
	$(GO) run ./hack/image -pkg ./cmd/hotcert-controller -version $(VERSION) -repository $(IMAGE_REPO) \
		-tarball $(IMAGE_DIR)/hotcert-controller.tar -layout $(IMAGE_DIR)/oci

## release: build what a release publishes into dist/VERSION (docs/releasing.md): hotcert and
## hotcert-controller for linux and darwin on amd64 and arm64, the controller's multi-platform image
## (OCI archive), the Helm chart packaged, a CycloneDX SBOM and SHA256SUMS. VERSION defaults to the
## tag at HEAD (vX.Y.Z); a release needs a clean, tagged tree whose modules require their siblings at
## VERSION; ALLOW_DIRTY=1 builds a rehearsal anyway (make release VERSION=v0.0.0-test ALLOW_DIRTY=1).
## Publishing the artifacts, the image and the chart happens elsewhere.
RELEASE_VERSION = $(if $(filter command line environment,$(origin VERSION)),$(VERSION),$(shell git describe --tags --exact-match --match 'v*' 2>/dev/null))
RELEASE_REPO    ?= $(IMAGE_REPO)
.PHONY: release
release:
	$(GO) run ./hack/release -version '$(RELEASE_VERSION)' -repository $(RELEASE_REPO) \
		$(if $(filter 1,$(ALLOW_DIRTY)),-allow-dirty)

## bench: run the benchmarks (not part of make test); kwok simulates the census benchmark's nodes; the runbook-vs-object benchmark runs trust-manager and Prometheus.
bench: tools k8s-bins kwok trust-manager
	$(GO) test -run '^$$' -bench . -benchmem $(addsuffix /...,$(MODULES))

## kwok: install kwok (fake nodes and pod lifecycles, for make bench) into .bin/kwok.
.PHONY: kwok
kwok:
	@hack/tools.sh kwok $(BIN_DIR)/kwok

## plots: render every docs/data/*.tsv as SVG plots in docs/img (the plots of each file: docs/data/plots.json).
.PHONY: plots
plots:
	$(GO) run ./hack/plot -config docs/data/plots.json -data docs/data -out docs/img

## fuzz: run every fuzz target of every module for FUZZTIME each (default 30s); make test runs their seeds.
## Needs no Kubernetes binaries. FUZZMINIMIZETIME bounds the minimization of each new input (default 1000x).
FUZZTIME ?= 30s
FUZZMINIMIZETIME ?= 1000x
.PHONY: fuzz
fuzz:
	@FUZZTIME=$(FUZZTIME) FUZZMINIMIZETIME=$(FUZZMINIMIZETIME) GO=$(GO) hack/fuzz.sh $(MODULES)

## demo: run the end-to-end demo.
demo:
	$(GO) run ./cmd/hotcert demo

## tidy: go mod tidy in every module of the workspace.
tidy:
	@hack/tidy.sh

clean:
	rm -rf $(BIN_DIR)
