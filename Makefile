# hotcert build and test entry points. `make test` is the one command that passes every test.
GO        ?= go
BIN_DIR   := $(CURDIR)/.bin
K8S_BIN   := $(BIN_DIR)/k8s
TEST_FLAGS ?= -race -count=1 -timeout 30m

export KUBEBUILDER_ASSETS := $(K8S_BIN)

# Every module of the workspace (go.work). In workspace mode `./...` matches only
# the module of the current directory, so each module's tree is named.
MODULES   := $(shell $(GO) list -m -f '{{.Dir}}' 2>/dev/null)
BENCH_MOD := $(CURDIR)/bench
PKGS      := $(addsuffix /...,$(filter-out $(BENCH_MOD),$(MODULES)))

.PHONY: all test unit vet fmt-check k8s-bins bench demo tidy clean

all: vet test

## test: build the Kubernetes binaries the tests need (once), then run every test with -race.
test: k8s-bins vet fmt-check
	$(GO) test $(TEST_FLAGS) $(PKGS)

## unit: run the tests without building Kubernetes binaries (tests that need them fail, never skip).
unit:
	$(GO) test $(TEST_FLAGS) $(PKGS)

vet:
	$(GO) vet $(addsuffix /...,$(MODULES))

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

## k8s-bins: build kube-apiserver, etcd and kube-controller-manager from the Go module proxy into .bin/k8s.
k8s-bins:
	@hack/build-k8s.sh $(K8S_BIN)

## bench: run the benchmarks (not part of make test).
bench: k8s-bins
	$(GO) test -run '^$$' -bench . -benchmem $(addsuffix /...,$(MODULES))

## fuzz: run every fuzz target of every module for FUZZTIME each (default 30s); make test runs their seeds.
FUZZTIME ?= 30s
.PHONY: fuzz
fuzz:
	@FUZZTIME=$(FUZZTIME) GO=$(GO) hack/fuzz.sh $(MODULES)

## demo: run the end-to-end demo.
demo:
	$(GO) run ./cmd/hotcert demo

## tidy: go mod tidy in every module of the workspace.
tidy:
	@hack/tidy.sh

clean:
	rm -rf $(BIN_DIR)
