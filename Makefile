# sandbox-mcp: one non-recursive Makefile, out-of-tree build in build/.
#   make            build build/sandbox-mcp
#   make run        install what is missing, build, start the server
#   make test       install what is missing, build with ASan/UBSan, run every suite
#   make fuzz       run the libFuzzer targets for a while (FUZZ_SECONDS, default 60)
#   make deps       install build and test dependencies (apt-get, npm)
#   make install    install the binary to $(PREFIX)/bin
#   make format     clang-format the sources; make format-check to verify

PREFIX     ?= /usr/local
BUILD      ?= build
CC         ?= cc
PKGS       := libh2o-evloop sqlite3 libpq jansson libcurl libjwt libssl libcrypto libseccomp libsodium zlib
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
           -Wformat=2 -Wno-unused-parameter -Wvla -Wimplicit-fallthrough -Wno-format-truncation
CFLAGS  ?= -O2 -g
ALL_CFLAGS := -std=gnu11 $(WARN) -D_GNU_SOURCE -DH2O_USE_LIBUV=0 -Isrc -I$(BUILD)/gen \
              $(PKG_CFLAGS) -MMD -MP $(CFLAGS)
LDLIBS  := $(PKG_LIBS) -lm

SAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

# Every module except the command line (src/cli/: main() and the commands) goes into a library
# shared by the binary and the tests.
CLI_SRC := $(sort $(wildcard src/cli/*.c))
LIB_SRC := $(filter-out src/cli/% src/sandbox/helper/%,$(shell find src -name '*.c' -not -path '*/node_modules/*' | sort))
MIGRATIONS := $(sort $(wildcard migrations/*.sql))
PG_MIGRATIONS := $(sort $(wildcard migrations/postgres/*.sql))
PROVIDERS := $(sort $(wildcard proxy/*.json))
WEB := $(sort $(wildcard src/web/assets/*))
GEN_SRC := $(BUILD)/gen/migrations.c $(BUILD)/gen/providers.c $(BUILD)/gen/web.c

define objs
$(patsubst src/%.c,$(1)/obj/%.o,$(2))
endef

# The sandbox helper (init, listener, file worker) is a separate static program, embedded in the
# server. Of the file operations it links all four parts, since the worker runs them in the
# sandbox: fsops_wire.c (it decodes the request), fsops_path.c, fsops_sniff.c and fsops.c. The
# server calls only the encoder, fsop_path_normalize and fsop_image_type (it links every file of
# src/, so the unit tests reach the operations too).
HELPER_SRC := $(sort $(wildcard src/sandbox/helper/*.c)) src/sandbox/confine.c \
              src/sandbox/fsops.c src/sandbox/fsops_path.c src/sandbox/fsops_sniff.c \
              src/sandbox/fsops_wire.c src/sandbox/listen_ports.c src/sandbox/fdpass.c \
              src/base/encode.c src/base/err.c src/base/utf8.c src/base/util.c \
              src/sandbox/opencode_serve.c
INIT_BIN  := $(BUILD)/sandbox-helper
INIT_BLOB := $(BUILD)/obj/gen/init_blob.o

LIB_OBJ      := $(call objs,$(BUILD),$(LIB_SRC)) $(BUILD)/obj/gen/migrations.o \
                $(BUILD)/obj/gen/providers.o $(BUILD)/obj/gen/web.o $(INIT_BLOB)
ASAN_LIB_OBJ := $(call objs,$(BUILD)/asan,$(LIB_SRC)) $(BUILD)/asan/obj/gen/migrations.o \
                $(BUILD)/asan/obj/gen/providers.o $(BUILD)/asan/obj/gen/web.o $(INIT_BLOB)

UNIT_SRC := $(sort $(wildcard tests/unit/*.c))
FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz_*.c))

.PHONY: all run test test-build test-suites unit fuzz bench soak deps deps-apt deps-npm deps-bench install clean \
        format format-check
all: $(BUILD)/sandbox-mcp

$(BUILD)/gen/schema.sql: $(MIGRATIONS) src/store/schema.sh
	@mkdir -p $(dir $@)
	sh src/store/schema.sh $@ $(MIGRATIONS)
$(BUILD)/gen/migrations.c: $(MIGRATIONS) $(PG_MIGRATIONS) $(BUILD)/gen/schema.sql src/embed.sh
	@mkdir -p $(dir $@)
	{ sh src/embed.sh embedded_migrations $(MIGRATIONS) && \
	  sh src/embed.sh embedded_migrations_pg $(PG_MIGRATIONS) && \
	  sh src/embed.sh embedded_schema $(BUILD)/gen/schema.sql; } > $@.tmp && mv $@.tmp $@
$(BUILD)/gen/providers.c: $(PROVIDERS) src/embed.sh
	@mkdir -p $(dir $@)
	sh src/embed.sh embedded_providers $(PROVIDERS) > $@.tmp && mv $@.tmp $@
$(BUILD)/gen/web.c: $(WEB) src/embed.sh
	@mkdir -p $(dir $@)
	sh src/embed.sh embedded_web $(WEB) > $@.tmp && mv $@.tmp $@

$(INIT_BIN): $(HELPER_SRC) $(wildcard src/sandbox/helper/*.h) src/sandbox/confine.h src/sandbox/fsops.h \
             src/sandbox/fsops_internal.h src/sandbox/listen_ports.h src/sandbox/opencode_serve.h \
             src/sandbox/fdpass.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(WARN) -D_GNU_SOURCE -Isrc -Os -static -s -o $@ $(HELPER_SRC) -ljansson
$(BUILD)/gen/init_blob.S: $(INIT_BIN)
	@mkdir -p $(dir $@)
	printf '\t.section .rodata\n\t.global sandbox_helper_image\n\t.global sandbox_helper_image_end\n\t.balign 16\nsandbox_helper_image:\n\t.incbin "%s"\nsandbox_helper_image_end:\n\t.section .note.GNU-stack,"",@progbits\n' "$(abspath $(INIT_BIN))" > $@
$(INIT_BLOB): $(BUILD)/gen/init_blob.S $(INIT_BIN)
	@mkdir -p $(dir $@)
	$(CC) -c -o $@ $<

$(BUILD)/obj/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@
$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@
$(BUILD)/asan/obj/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -O1 $(SAN_FLAGS) -c $< -o $@
$(BUILD)/asan/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -O1 $(SAN_FLAGS) -c $< -o $@

$(BUILD)/libsandbox-mcp.a: $(LIB_OBJ)
	rm -f $@ && ar rcs $@ $^
$(BUILD)/asan/libsandbox-mcp.a: $(ASAN_LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/sandbox-mcp: $(call objs,$(BUILD),$(CLI_SRC)) $(BUILD)/libsandbox-mcp.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)
$(BUILD)/asan/sandbox-mcp: $(call objs,$(BUILD)/asan,$(CLI_SRC)) $(BUILD)/asan/libsandbox-mcp.a
	$(CC) $(SAN_FLAGS) -o $@ $^ $(LDLIBS)

# Unit tests: one binary per file, sanitized.
$(BUILD)/asan/tests/%: tests/unit/%.c tests/harness.h $(BUILD)/asan/libsandbox-mcp.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Itests -O1 $(SAN_FLAGS) -o $@ $< $(BUILD)/asan/libsandbox-mcp.a $(LDLIBS)
UNIT_BIN := $(patsubst tests/unit/%.c,$(BUILD)/asan/tests/%,$(UNIT_SRC))

# Fuzz targets (clang + libFuzzer); `make test` replays their corpora.
FUZZ_CC ?= clang
FUZZ_FLAGS := -g -O1 -fsanitize=fuzzer,address,undefined
FUZZ_BIN := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(FUZZ_SRC))
# The library is compiled once for all targets (with coverage instrumentation but without the
# fuzzer's main), then each target links against it.
FUZZ_CFLAGS := -std=gnu11 -D_GNU_SOURCE -DH2O_USE_LIBUV=0 -Isrc -I$(BUILD)/gen $(PKG_CFLAGS) -g -O1 \
               -fsanitize=fuzzer-no-link,address,undefined
FUZZ_LIB_OBJ := $(patsubst src/%.c,$(BUILD)/fuzz/obj/%.o,$(LIB_SRC)) \
                $(BUILD)/fuzz/obj/gen/migrations.o $(BUILD)/fuzz/obj/gen/providers.o \
                $(BUILD)/fuzz/obj/gen/web.o
$(BUILD)/fuzz/obj/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP -c $< -o $@
$(BUILD)/fuzz/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@
$(BUILD)/fuzz/libfuzz.a: $(FUZZ_LIB_OBJ) $(INIT_BLOB)
	rm -f $@ && ar rcs $@ $^
$(BUILD)/fuzz/%: tests/fuzz/%.c $(BUILD)/fuzz/libfuzz.a
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_FLAGS) -o $@ $< $(BUILD)/fuzz/libfuzz.a $(LDLIBS)

# The same targets for `make test`, which only replays their corpora: each linked with a
# standalone main (tests/fuzz/replay.c) and the sanitized library the unit tests use, so the
# source is not compiled a third time with coverage instrumentation.
$(BUILD)/asan/fuzz/%: tests/fuzz/%.c tests/fuzz/replay.c $(BUILD)/asan/libsandbox-mcp.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -O1 $(SAN_FLAGS) -o $@ $< tests/fuzz/replay.c $(BUILD)/asan/libsandbox-mcp.a $(LDLIBS)
REPLAY_BIN := $(patsubst tests/fuzz/%.c,$(BUILD)/asan/fuzz/%,$(FUZZ_SRC))

unit: $(UNIT_BIN)

# test and run install Debian packages first, then build in a second make so that pkg-config is
# asked again once the libraries exist (on a fresh machine they do not at first).
# The build runs one job per core, beside the npm installs (which mostly wait on the network);
# the suites then run on their own.
NPROC := $(shell nproc 2>/dev/null || echo 1)
test: deps-apt
	@$(MAKE) --no-print-directory deps-apt APT_PKGS="$(TEST_APT)"
	$(MAKE) --no-print-directory -j$$(($(NPROC) + 2)) deps-npm test-build
	$(MAKE) --no-print-directory test-suites
test-build: $(BUILD)/asan/sandbox-mcp $(BUILD)/sandbox-mcp $(UNIT_BIN) $(REPLAY_BIN)
test-suites: test-build
	BUILD=$(BUILD) sh tests/run.sh

# Benchmarks: release build against peers on this machine; results in bench/out/*.md.
BENCH_APT := bubblewrap util-linux wrk tinyproxy nginx haproxy postgresql
bench: deps
	@$(MAKE) --no-print-directory deps-bench $(BUILD)/sandbox-mcp $(BUILD)/spawntime
	BUILD=$(BUILD) sh bench/run.sh
$(BUILD)/spawntime: bench/spawntime.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(WARN) -D_GNU_SOURCE -O2 -o $@ $<
deps-bench:
	@$(MAKE) --no-print-directory deps-apt APT_PKGS="$(BENCH_APT)"

# The soak: the release build under an hour of mixed load (SOAK_MINUTES, SOAK_CLIENTS, SOAK_USERS,
# SOAK_SAMPLE_SECONDS), each sample's slope in bench/soak.md; not part of `make test`, which runs
# its short form (tests/integration/soak.test.mjs).
soak: deps
	@$(MAKE) --no-print-directory deps-apt APT_PKGS="$(TEST_APT)"
	@$(MAKE) --no-print-directory $(BUILD)/sandbox-mcp
	node bench/soak.mjs

FUZZ_SECONDS ?= 60
fuzz: $(FUZZ_BIN)
	@for f in $(FUZZ_BIN); do \
	    name=$$(basename $$f); mkdir -p tests/fuzz/corpus/$$name; \
	    $$f -max_total_time=$(FUZZ_SECONDS) tests/fuzz/corpus/$$name || exit 1; \
	done

run: deps
	$(MAKE) --no-print-directory -j$(NPROC) $(BUILD)/sandbox-mcp
	$(BUILD)/sandbox-mcp serve

# Debian packages needed to build and test; installed only when missing. What only tests use is
# installed by `make test`, not by `make run`: the browser the web page tests drive, and the
# tools the egress tests run inside sandboxes (python3 with venv for pip, wget) or around them
# (ip, to bring up loopback in a network namespace of their own), the PostgreSQL server the
# store's tests run on a second time (libpq, its client library, is a build dependency), with
# Patroni and etcd for its failover test, and nginx, the load balancer in front of the nodes the
# cluster tests start.
APT_PKGS := build-essential pkg-config libh2o-evloop-dev libsqlite3-dev libjansson-dev \
            libcurl4-openssl-dev libjwt-dev libpq-dev libseccomp-dev libssl-dev libsodium-dev zlib1g-dev \
            clang libclang-rt-14-dev clang-format \
            nodejs npm git curl ca-certificates sqlite3 debootstrap
TEST_APT := chromium python3 python3-venv wget iproute2 postgresql nginx patroni etcd-server
deps: deps-apt deps-npm
deps-apt:
	@missing=""; for p in $(APT_PKGS); do \
	    if [ "$$p" = nodejs ] || [ "$$p" = npm ]; then command -v $$p >/dev/null 2>&1 && continue; fi; \
	    dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	    echo "installing:$$missing"; \
	    SUDO=""; [ "$$(id -u)" -eq 0 ] || SUDO=sudo; \
	    $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi
AGENT_PKGS := opencode claude-code codex
deps-npm: tests/node_modules/.installed $(AGENT_PKGS:%=src/runs/%/node_modules/.installed)
tests/node_modules/.installed: tests/package.json tests/package-lock.json
	cd tests && npm ci --no-audit --no-fund --loglevel=error
	touch $@
# The coding agents for runs (OpenCode, Claude Code, Codex), mounted into sandboxes. Each version
# is pinned exactly, and so are the platform packages each depends on, so no lock file is needed
# (npm writes only this platform's optional packages into one, which then fails `npm ci`
# elsewhere).
src/runs/%/node_modules/.installed: src/runs/%/package.json
	cd src/runs/$* && npm install --no-package-lock --no-audit --no-fund --loglevel=error
	touch $@

install: $(BUILD)/sandbox-mcp
	install -D -m 0755 $(BUILD)/sandbox-mcp $(DESTDIR)$(PREFIX)/bin/sandbox-mcp

format:
	clang-format -i $$(find src tests bench -name '*.[ch]' -not -path '*/node_modules/*')
format-check:
	clang-format --dry-run --Werror $$(find src tests bench -name '*.[ch]' -not -path '*/node_modules/*')

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
