# hotcert build and test entry points. `make test` is the one command that passes every test.
GO        ?= go
BIN_DIR   := $(CURDIR)/.bin
K8S_BIN   := $(BIN_DIR)/k8s
TEST_FLAGS ?= -race -count=1 -timeout 30m

export KUBEBUILDER_ASSETS := $(K8S_BIN)

.PHONY: all test unit vet fmt-check k8s-bins bench demo clean

all: vet test

## test: build the Kubernetes binaries the tests need (once), then run every test with -race.
test: k8s-bins vet fmt-check
	$(GO) test $(TEST_FLAGS) ./...

## unit: run the tests without building Kubernetes binaries (tests that need them fail, never skip).
unit:
	$(GO) test $(TEST_FLAGS) ./...

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

## k8s-bins: build kube-apiserver, etcd and kube-controller-manager from the Go module proxy into .bin/k8s.
k8s-bins:
	@hack/build-k8s.sh $(K8S_BIN)

## bench: run the benchmarks (not part of make test).
bench: k8s-bins
	$(GO) test -run '^$$' -bench . -benchmem ./...
	@if [ -f bench/go.mod ]; then cd bench && $(GO) test -run '^$$' -bench . -benchmem ./...; fi

## demo: run the end-to-end demo.
demo:
	$(GO) run ./cmd/hotcert demo

clean:
	rm -rf $(BIN_DIR)
