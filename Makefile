# Regenerate Go code from the protobuf definitions under proto/.
# Requires protoc (Debian: apt-get install -y protobuf-compiler); the Go
# plugins are pinned as tool directives in go.mod and run via `go tool`.

GO     ?= go
PROTOC ?= protoc

PROTO_DIR   := proto
PROTO_FILES := $(wildcard $(PROTO_DIR)/electord/v1/*.proto)

# $(call protoc_gen,<out dir>)
protoc_gen = $(PROTOC) -I $(PROTO_DIR) \
	--plugin=protoc-gen-go=$(shell $(GO) tool -n protoc-gen-go) \
	--plugin=protoc-gen-go-grpc=$(shell $(GO) tool -n protoc-gen-go-grpc) \
	--go_out=$(1) --go_opt=paths=source_relative \
	--go-grpc_out=$(1) --go-grpc_opt=paths=source_relative \
	$(PROTO_FILES)

.PHONY: proto proto-check

## proto: regenerate proto/**/*.pb.go in place
proto:
	$(call protoc_gen,$(PROTO_DIR))

## proto-check: fail if the committed *.pb.go differ from a fresh generation
proto-check:
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	mkdir -p "$$tmp/want/electord/v1" "$$tmp/got" && \
	cp $(PROTO_DIR)/electord/v1/*.pb.go "$$tmp/want/electord/v1/" && \
	$(call protoc_gen,"$$tmp/got") && \
	if diff -ru "$$tmp/want" "$$tmp/got"; then \
		echo "proto-check: generated code is up to date"; \
	else \
		echo "proto-check: generated code is stale; run 'make proto'" >&2; exit 1; \
	fi

.PHONY: test test-product test-tools test-e2e

## test: every test, as CI runs it (.ci/run). Three parts: the product
## module; the tools module (tools/); and the test-only modules under e2e/
## (a real Kubernetes API server, kustomize, a headless browser), which keep
## their heavy dependencies out of the product's go.mod and install what
## they need from Debian's packages if it is missing. Their tests mostly
## wait on real processes and real timeouts, not on the CPU, so the tools
## run beside the other two: the product first (it is the CPU-bound part,
## under the race detector), then e2e. The tools' output is shown when all
## are done. An interrupt stops everything: the tools run in a process group
## of their own, which the interrupt's trap ends.
test:
	@tools_log=$$(mktemp); \
	setsid $(MAKE) --no-print-directory test-tools >"$$tools_log" 2>&1 & tools=$$!; \
	trap 'kill -TERM -$$tools 2>/dev/null; rm -f "$$tools_log"; exit 130' INT TERM; \
	$(MAKE) --no-print-directory test-product && $(MAKE) --no-print-directory test-e2e; rc=$$?; \
	wait $$tools; tools_rc=$$?; cat "$$tools_log"; rm -f "$$tools_log"; \
	[ $$rc -eq 0 ] && [ $$tools_rc -eq 0 ]

## test-product: the product module with the race detector, except the pure
## election core and its simulator: election/ has one goroutine (a test there
## says so), where the race detector can find nothing and costs ten times the
## time. The L/F pool's comparison variants are compiled in only with the
## lfvariant tag, so the pool's tests run once more with it.
test-product:
	$(GO) test -race -count=1 -timeout 30m $$($(GO) list ./... | grep -v 'electord/electord/election\(/\|$$\)')
	$(GO) test -count=1 -timeout 30m ./election/...
	$(GO) test -race -count=1 -timeout 30m -tags lfvariant ./transport/lf/...

## test-tools: the tools module (tools/): the processes-and-network
## integration tests, the chaos schedule, the comparison servers' conformance
## suite (with the pool's variants) and the commands' own tests.
## -timeout 30m: tools/integration and tools/integration/chaos take turns on
## the machine (tools/internal/testlock), so one package's clock includes its
## wait for the other.
test-tools:
	@echo "== tools"
	cd tools && $(GO) test -race -count=1 -timeout 30m -tags lfvariant ./...

## test-e2e: each module under e2e/.
test-e2e:
	@set -e; for m in e2e/*/go.mod; do \
		[ -f "$$m" ] || continue; d=$$(dirname "$$m"); \
		echo "== $$d"; (cd "$$d" && $(GO) test -count=1 -timeout 40m ./...); \
	done
