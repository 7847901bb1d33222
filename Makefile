# mcpbus — the README's two commands are `make run` and `make test`.
GO      ?= go
BIN     := bin
# Every module of the workspace (go test ./... does not work at a go.work root).
MODULES := $(shell $(GO) list -m -f '{{.Dir}}' 2>/dev/null)
PKGS    := $(addsuffix /...,$(MODULES))
# make run's addresses, each in this one place:
#   API_ADDR   host:port of the REST API and /mcp (default: api.listen of config.yaml, else 127.0.0.1:8001)
#   NATS_PORT  port of the embedded NATS server (default 4322; -1 picks a free one)
#   DEMO_ADDR  host:port of the demo server over HTTP (make run starts it there, and the
#              copy of the example extensions config points its demohttp server at it)
# e.g. make run API_ADDR=127.0.0.1:9001 NATS_PORT=5322 DEMO_ADDR=127.0.0.1:9765
API_ADDR  ?=
NATS_PORT ?=
DEMO_ADDR ?= 127.0.0.1:8765

.PHONY: run build test race bench conformance lint tidy clean chaos fuzz console console-screenshots k8s

## run: copy the example configs when missing, build, start everything (embedded NATS + SQLite + demo servers);
## API_ADDR, NATS_PORT and DEMO_ADDR (above) move its ports
run: build extensions_config.json config.yaml
	@$(BIN)/demo-server -transport http -addr $(DEMO_ADDR) & demo=$$!; \
	trap 'kill $$demo 2>/dev/null' EXIT INT TERM; \
	$(BIN)/mcpbus dev$(if $(API_ADDR), --api-listen $(API_ADDR))$(if $(NATS_PORT), --nats-port $(NATS_PORT))

# The example's demohttp URL is the default DEMO_ADDR; the copy takes DEMO_ADDR's.
extensions_config.json:
	sed 's#http://127.0.0.1:8765/mcp#http://$(DEMO_ADDR)/mcp#' examples/extensions_config.example.json > $@

config.yaml:
	cp examples/config.example.yaml $@

## build: the mcpbus binary (every service: `mcpbus serve <service>`, `mcpbus dev`) and the demo MCP server
build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/mcpbus ./cmd/mcpbus
	$(GO) build -o $(BIN)/demo-server ./examples/demoserver

## test: every module's tests against real PostgreSQL and NATS (see .ci/run)
test:
	$(GO) vet $(PKGS)
	$(GO) test -count=1 -timeout 12m $(PKGS)

## k8s: write deploy/k8s from the Helm chart deploy/helm/mcpbus (HELM: the helm binary; .ci/run pins and builds it)
HELM ?= $(shell $(GO) env GOPATH)/bin/helm
k8s:
	HELM=$(HELM) bash deploy/helm/generate-k8s.sh

## chaos: the whole fault suite (a network partition of one NATS node, every fault, private PostgreSQL, 10-minute soak);
## the table goes to $(BIN)/chaos-report.txt. make test runs its short subset.
CHAOS_SOAK ?= 10m
chaos:
	@mkdir -p $(BIN)
	MCPBUS_CHAOS=full MCPBUS_CHAOS_SOAK=$(CHAOS_SOAK) MCPBUS_CHAOS_REPORT=$(CURDIR)/$(BIN)/chaos-report.txt \
		$(GO) test -count=1 -v -timeout 60m -run '^TestFaultSuite$$' ./chaos

## fuzz: each fuzz target for FUZZTIME (the seed corpora also run in make test)
FUZZTIME ?= 10s
FUZZ_TARGETS := pkg/config:FuzzParseExtensions pkg/config:FuzzSettings pkg/bus:FuzzEnvelopes \
	pkg/bus:FuzzPersonalRuntimeName pkg/bus:FuzzVisibleURI pkg/mcpclient:FuzzUpstreamReply
fuzz:
	@for t in $(FUZZ_TARGETS); do dir=$${t%%:*}; fn=$${t##*:}; \
		echo "== $$dir $$fn"; \
		(cd $$dir && $(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) .) || exit 1; \
	done

## race: every test under the race detector (slower; not part of make test)
race:
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

## bench: benchmarks, reported as ratios against a direct call in the same run
## (one package at a time, so benchmarks do not compete for the CPUs); the /mcp
## benchmark (direct, then /mcp, supergateway and mcp-proxy with mcp-go's client and
## with the lean load generator, and the relay floor: a bare HTTP → NATS → mcp-go
## stdio client relay with the lean generator) runs 3 times: take the median; the
## CPU-per-call benchmark (gateway, upstream and load generator CPU from /proc for
## direct, the relay floor, /mcp, NATS, REST and the npm gateways, at 1 and 32 callers)
## runs once
MCP_BENCHTIME ?= 6000x
CPU_BENCHTIME ?= 2000x
bench: bench-deps
	$(GO) test -p 1 -run '^$$' -bench . -skip '^(BenchmarkMCPEndpoint|BenchmarkCPUPerCall)$$' -benchmem $(PKGS)
	cd cmd/mcpbus && $(GO) test -run '^$$' -bench '^BenchmarkMCPEndpoint$$' -benchtime $(MCP_BENCHTIME) -count 3 .
	cd cmd/mcpbus && $(GO) test -run '^$$' -bench '^BenchmarkCPUPerCall$$' -benchtime $(CPU_BENCHTIME) -count 1 .

## bench-deps: supergateway, mcp-proxy and Node 22 from npm into bench/.deps (the /mcp benchmark's comparison rows)
.PHONY: bench-deps
bench-deps:
	bench/deps.sh

## conformance: the official MCP conformance suite against the fixture and through mcpbus's /mcp
## (installs @modelcontextprotocol/conformance 0.1.16 and 0.2.0-alpha.12 with Node 22 from npm into
## conformance/.deps and conformance/.deps-next; server legs at 2025-11-25 and 2026-07-28)
conformance:
	conformance/run.sh

## console: the console's browser suites alone (Playwright + Debian's Chromium + axe-core against a real
## mcpbus dev; make test runs it too); console-screenshots also rewrites docs/console/*.png
console:
	cd cmd/mcpbus && $(GO) test -count=1 -run '^TestConsole(InBrowser|CatalogOf10000Tools)$$' .
console-screenshots:
	cd cmd/mcpbus && MCPBUS_CONSOLE_SCREENSHOTS=1 $(GO) test -count=1 -run '^TestConsoleInBrowser$$' .

## lint: go vet plus gofmt check
lint:
	$(GO) vet $(PKGS)
	@out=$$(gofmt -l $(MODULES)); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

tidy:
	@for m in $(MODULES); do (cd $$m && $(GO) mod tidy) || exit 1; done

clean:
	rm -rf $(BIN) .mcpbus
