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
