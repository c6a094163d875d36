# kubectl-gobrave — run `make help` for the targets.
SHELL := /usr/bin/env bash
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X github.com/gobrave/kubectl-gobrave/pkg/cmd.version=$(VERSION) -X github.com/gobrave/kubectl-gobrave/pkg/cmd.commit=$(COMMIT)
BIN := bin/kubectl-gobrave
PREFIX ?= $(HOME)/.local
FUZZTIME ?= 60s

.PHONY: help build install test test-unit test-e2e vet fuzz bench demo testbin cluster-up clean

help: ## Show the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

build: ## Build bin/kubectl-gobrave (CGO_ENABLED=0)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/kubectl-gobrave

install: build ## Install kubectl-gobrave into $(PREFIX)/bin (put it on PATH for `kubectl gobrave`)
	install -d $(PREFIX)/bin && install -m 0755 $(BIN) $(PREFIX)/bin/kubectl-gobrave
	@echo "installed $(PREFIX)/bin/kubectl-gobrave; try: kubectl gobrave version --client"

test: vet test-unit test-e2e ## The whole suite: vet, unit tests with -race, e2e on a real local control plane

vet: ## go vet and gofmt
	$(GO) vet ./...
	@out=$$(gofmt -l cmd pkg test); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

test-unit: ## Unit tests with -race (fake clientsets, temp databases)
	$(GO) test -race -count=1 ./cmd/... ./pkg/...

test-e2e: testbin ## e2e: kubectl gobrave through a real kubectl on a kwok control plane
	GOBRAVE_E2E=1 $(GO) test -race -count=1 -timeout 40m ./test/e2e/

testbin: ## Build the control plane (kube-apiserver, etcd, kwok ...) into the cache, once
	hack/testbin.sh >/dev/null

fuzz: ## Fuzz the runtime ID, spec file and config file parsers ($(FUZZTIME) each)
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./pkg/runtimeid/
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./pkg/spec/
	$(GO) test -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime $(FUZZTIME) ./pkg/config/

bench: ## Store benchmarks (transitions/s, ps over 10k records); see docs/performance.md
	$(GO) test -run '^$$' -bench . -benchmem ./pkg/store/ ./pkg/monitor/

demo: build testbin ## A real lifecycle on a local kwok cluster, printed step by step
	hack/demo.sh

cluster-up: testbin ## Start a local kwok cluster and print its kubeconfig
	hack/cluster-up.sh

clean: ## Remove build outputs
	rm -rf bin dist
