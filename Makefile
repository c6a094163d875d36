# kubectl-gobrave — run `make help` for the targets.
SHELL := /usr/bin/env bash
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X github.com/gobrave/kubectl-gobrave/pkg/cmd.version=$(VERSION) -X github.com/gobrave/kubectl-gobrave/pkg/cmd.commit=$(COMMIT)
BIN := bin/kubectl-gobrave
PREFIX ?= $(HOME)/.local
FUZZTIME ?= 60s
BENCH_N ?= 1000,10000,100000
BENCH_FLAGS ?=
BENCH_OUT ?= bin/bench-results.md
BENCH_CHARTS ?= bin/bench-charts

.PHONY: help build install test test-unit test-e2e test-faults test-model vet fuzz bench bench-sqlite demo testbin cluster-up clean docs dist test-dist test-k9s

help: ## Show the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

build: ## Build bin/kubectl-gobrave (CGO_ENABLED=0)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/kubectl-gobrave

install: build ## Install kubectl-gobrave into $(PREFIX)/bin (put it on PATH for `kubectl gobrave`)
	install -d $(PREFIX)/bin && install -m 0755 $(BIN) $(PREFIX)/bin/kubectl-gobrave
	install -m 0755 hack/completion/kubectl_complete-gobrave $(PREFIX)/bin/kubectl_complete-gobrave
	@echo "installed $(PREFIX)/bin/kubectl-gobrave; try: kubectl gobrave version --client"

test: vet test-unit test-e2e test-faults test-dist test-k9s ## The whole suite: vet, unit tests with -race, e2e and faults on a real local control plane, dist, k9s

vet: ## go vet and gofmt
	$(GO) vet ./...
	@out=$$(gofmt -l cmd pkg test); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

test-unit: ## Unit tests with -race (fake clientsets, temp databases, the audit classifier and the bench)
	$(GO) test -race -count=1 -timeout 30m ./cmd/... ./pkg/... ./internal/... ./hack/bench/

MODEL_CHECKS ?= 10000
test-model: ## The lifecycle engine's model-based test, long mode: MODEL_CHECKS random sequences (default 10000; make test-unit runs 12)
	$(GO) test -count=1 -timeout 0 -run '^TestModel$$' ./pkg/lifecycle/ -rapid.checks=$(MODEL_CHECKS)

test-e2e: testbin ## e2e: kubectl gobrave through a real kubectl on a kwok control plane
	GOBRAVE_E2E=1 $(GO) test -race -count=1 -timeout 40m -skip '^(TestK9s|TestFault.*)$$' ./test/e2e/

test-faults: testbin ## Fault suite on a control plane of its own: kill -9, API server restart, unreachable, 429/500 proxy, 8 processes, broken DB (docs/reliability.md)
	GOBRAVE_E2E=1 GOBRAVE_CLUSTER_FLAGS='--nodes 4 --disable-qps-limits' $(GO) test -race -count=1 -timeout 30m -run '^TestFault' -v ./test/e2e/ 2>&1 | grep --line-buffered -vE '^=== (RUN|PAUSE|CONT)'; exit $${PIPESTATUS[0]}

test-k9s: testbin ## plugins.yaml against k9s's schema, then the real k9s driving it in tmux (TestK9s)
	cd hack/k9s && $(GO) test -count=1 ./...
	hack/k9s/build.sh >/dev/null
	GOBRAVE_E2E=1 $(GO) test -race -count=1 -timeout 20m -run '^TestK9s$$' ./test/e2e/

testbin: ## Build the control plane (kube-apiserver, etcd, kwok ...) into the cache, once
	hack/testbin.sh >/dev/null

fuzz: ## Fuzz the runtime ID, spec file and config file parsers ($(FUZZTIME) each)
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./pkg/runtimeid/
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./pkg/spec/
	$(GO) test -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime $(FUZZTIME) ./pkg/config/

bench: build testbin ## Store benchmarks, then the scale run on kwok clusters at N = $(BENCH_N) (17–26 min on an idle machine here, 57 min at load 12–16; report in $(BENCH_OUT), charts in $(BENCH_CHARTS)); see docs/performance.md
	$(GO) test -p 1 -run '^$$' -bench . -benchmem ./pkg/store/ ./pkg/monitor/
	$(GO) run ./hack/bench -n $(BENCH_N) -plugin $(BIN) -store-bench=false -out $(BENCH_OUT) -charts $(BENCH_CHARTS) $(BENCH_FLAGS)

bench-sqlite: ## SQLite drivers compared on the writer's statements (hack/sqldrivers, a module of its own): ncruces (pure Go), then mattn (cgo); see docs/performance.md
	cd hack/sqldrivers && $(GO) run .
	cd hack/sqldrivers && CGO_ENABLED=1 $(GO) run -tags mattn .

demo: ## A real lifecycle on a local kwok cluster, printed step by step (builds the plugin and the control plane first if needed)
	MAKE=$(MAKE) hack/demo.sh

cluster-up: testbin ## Start a local kwok cluster and print its kubeconfig
	hack/cluster-up.sh

docs: ## Regenerate the command reference in docs/cli from the cobra tree (TestDocsUpToDate checks it)
	$(GO) run ./hack/gendocs docs/cli

dist: ## Release archives for linux/darwin/windows x amd64/arm64 in dist/ and krew-manifest.yaml (VERSION=v1.2.3 to override)
	hack/dist.sh

test-dist: ## Build dist, validate the krew manifest, install the archive with krew and run it through kubectl
	hack/test-dist.sh

clean: ## Remove build outputs
	rm -rf bin dist
