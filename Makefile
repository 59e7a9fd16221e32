# Nodewright developer entry points. `make help` lists them.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
BIN := $(CURDIR)/bin
GOTEST_FLAGS ?=

.PHONY: help run build test test-unit test-chaos chaos test-integration verify generate bench crds controlplane kwok tools helm sandbox sandbox-down clean
.PHONY: bench-live

help: ## List the targets.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

run: ## Simulate the embedded quickstart: no cluster, no cloud, a few seconds.
	go run ./cmd/nodewright simulate

build: ## Build bin/nodewright.
	go build -o $(BIN)/nodewright ./cmd/nodewright

test: test-unit test-chaos test-integration ## Unit, chaos and integration tests (builds the control plane on first use).

test-unit: ## Unit tests: no processes, no network.
	go test $(GOTEST_FLAGS) ./...

test-chaos: ## Chaos test: 200 seeds of examples/chaos with every fault kind injected, 0 invariant violations (~2-3 min on 2 cores).
	go test -tags chaos -count=1 -timeout 20m -run '^TestChaos$$' $(GOTEST_FLAGS) ./internal/simulator/

CHAOS_SEEDS ?= 2000
chaos: ## Play examples/chaos for $(CHAOS_SEEDS) seeds with every fault kind; print faults per kind, violations per invariant, wall time.
	go run ./internal/simulator/cmd/chaos -seeds $(CHAOS_SEEDS)

controlplane: ## Build (once, cached) etcd, kube-apiserver, kube-controller-manager, kube-scheduler.
	@hack/controlplane.sh

kwok: ## Build (once, cached) the real kwok controller pinned in hack/kwok/go.mod; prints its path.
	@hack/kwok.sh

test-integration: helm ## Integration tests against a real etcd + kube-apiserver (+ controller-manager, scheduler, the real kwok).
	dir="$$(hack/controlplane.sh)"; kwok="$$(hack/kwok.sh)"; \
	NODEWRIGHT_CONTROLPLANE_DIR="$$dir" NODEWRIGHT_KWOK_BIN="$$kwok" NODEWRIGHT_HELM="$(BIN)/helm" go test -tags integration -count=1 -timeout 20m $(GOTEST_FLAGS) ./test/integration/...

FUZZTIME ?= 10s
# package:target pairs; go fuzzes one target of one package per run.
FUZZ_TARGETS := ./internal/sched/requirement/:FuzzRequirementAlgebra ./internal/sched/resources/:FuzzQuantities \
	./internal/manifest/:FuzzManifests ./pkg/catalog/:FuzzParse ./internal/simulator/:FuzzScenario \
	./providers/aws/interruption/:FuzzParseMessage
.PHONY: fuzz
fuzz: ## Run each native Go fuzz target for $(FUZZTIME) (e.g. FUZZTIME=60s); a crasher lands in its package's testdata/fuzz (hack/fuzz.sh).
	@for t in $(FUZZ_TARGETS); do \
		pkg="$${t%%:*}" name="$${t##*:}"; \
		echo "--- $$name ($$pkg, $(FUZZTIME))"; \
		hack/fuzz.sh "$$pkg" "$$name" $(FUZZTIME) || exit 1; \
	done

SANDBOX_PROVIDER ?= kwok
sandbox: ## Start a local sandbox: control plane, CRDs, Nodewright (kwok; SANDBOX_PROVIDER=aws: the fake AWS); prints what to run next.
	dir="$$(hack/controlplane.sh)"; \
	go build -o $(BIN)/sandbox ./cmd/sandbox && NODEWRIGHT_CONTROLPLANE_DIR="$$dir" $(BIN)/sandbox up --state .sandbox --cloud-provider $(SANDBOX_PROVIDER)

sandbox-down: ## Stop the sandbox and everything it started.
	go build -o $(BIN)/sandbox ./cmd/sandbox && $(BIN)/sandbox down --state .sandbox

helm: ## Build the pinned helm v4 CLI into bin/ (chart lint and render tests).
	cd hack/helm && go build -o $(BIN)/helm helm.sh/helm/v4/cmd/helm

tools: ## Build the pinned code generators into bin/.
	cd hack && go build -o $(BIN)/controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen
	cd hack && go build -o $(BIN)/crdpatch ./crdpatch

generate: tools ## Regenerate deepcopy functions and CRDs from the API types.
	$(BIN)/controller-gen object:headerFile=hack/boilerplate.go.txt paths=./api/...
	rm -f api/crds/*.yaml
	$(BIN)/controller-gen crd output:crd:artifacts:config=api/crds paths=./api/...
	$(BIN)/crdpatch api/crds/*.yaml
	rm -f charts/nodewright/crds/*.yaml
	cp api/crds/*.yaml charts/nodewright/crds/

verify: generate ## gofmt, go vet, go.mod tidy, and generated files up to date.
	@out="$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go'))"; \
	if [[ -n "$$out" ]]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet ./...
	go vet -tags integration ./test/integration/...
	cd hack && go vet ./crdpatch
	@go mod tidy -diff || { echo "go.mod/go.sum are not tidy; run 'go mod tidy' and commit"; exit 1; }
	@if [[ -n "$$(git status --porcelain -- api charts/nodewright/crds)" ]]; then \
		echo "generated files are stale; run 'make generate' and commit:"; git status --porcelain -- api charts/nodewright/crds; exit 1; fi

bench: ## Benchmarks: the solver on Karpenter's diverse-pods workload against the targets, plan on it, the consolidation plan at 100-5,000 nodes, the simulator's day, Go benchmarks.
	go run ./internal/benchmark/cmd/diverse
	go run ./internal/benchmark/cmd/diverse -pods 5000 -out $(BIN)/diverse-5000
	go run ./cmd/nodewright plan -f $(BIN)/diverse-5000/workload.yaml --catalog $(BIN)/diverse-5000/catalog.json | tail -n 1
	@echo "consolidation plan, one pass over N initialized 32-CPU nodes (Karpenter on this machine kind: ~3 s at 100, ~11 s at 500, ~19 s at 1,000 nodes, at most ~100 nodes per command; target: the whole 1,000-node cluster under 2 s):"
	go test -run '^$$' -bench Consolidation -benchtime 3x ./internal/disruption/ | grep Benchmark
	@echo "simulate examples/daily (24 h, ~450 nodes, ~6,000 pods; target: under 60 s on 2 cores):"
	go run ./cmd/nodewright simulate -q -f examples/daily | tail -n 7
	go test -run '^$$' -bench . -benchmem $$(go list ./... | grep -v internal/disruption)

BENCH_LIVE_FLAGS ?=
bench-live: build ## Live benchmark (not in `make test`): control plane + real kwok + bin/nodewright at 500+100, 2,000+400 and 10,000+2,000 pods vs Karpenter's figures
	dir="$$(hack/controlplane.sh)"; kwok="$$(hack/kwok.sh)"; \
	NODEWRIGHT_CONTROLPLANE_DIR="$$dir" NODEWRIGHT_KWOK_BIN="$$kwok" go run ./test/benchlive -nodewright $(BIN)/nodewright $(BENCH_LIVE_FLAGS)

crds: ## Print the CRDs (same as 'nodewright crds').
	@go run ./cmd/nodewright crds

clean: ## Remove build outputs (the cached control plane stays).
	rm -rf $(BIN)
