# stepprof - build. `make help` lists the targets and options.
# Options: DEBUG=1 (-O0 -g3 -Werror), SAN=address,undefined, CUDA_HOME=/usr/local/cuda, V=1,
# PREFIX=/usr/local and DESTDIR= for `make install`.

CUDA_HOME ?= /usr/local/cuda
PREFIX ?= /usr/local
VERSION := $(shell sed -n 's/^\#define SP_VERSION "\(.*\)"/\1/p' config/version.h)
CC ?= gcc
O := build
PKGS := inih libzstd libunwind libdw libelf libisal
# offline symbolisation, and ISA-L's igzip (deflate and CRC-32) for convert's gzip: linked into
# the CLI and the tests, never into the preloaded library
CLI_PKGS := libdw libelf libisal
# Debian package that provides each pkg-config module
PKG_DEB_inih := libinih-dev
PKG_DEB_libzstd := libzstd-dev
PKG_DEB_libunwind := libunwind-dev
PKG_DEB_libdw := libdw-dev
PKG_DEB_libelf := libelf-dev
PKG_DEB_cmocka := libcmocka-dev
PKG_DEB_libisal := libisal-dev
# man-db: the install test reads the installed man page with man(1); clang and libclang-rt-14-dev:
# libFuzzer, for the fuzz harnesses that `make test` runs briefly; libtcmalloc-minimal4: test_malloc
# checks that tcmalloc is not taken for glibc; python3-markdown-it: the documentation test
# (tests/e2e/docs.sh); the other python3-* modules run HTA in tests/e2e/cli_kineto.sh when HTA is
# there (optional: $SP_HTA, ../shared/tools/hta or an installed package; skipped otherwise)
DEBS := libinih-dev libzstd-dev libunwind-dev libdw-dev libelf-dev libisal-dev g++ libcmocka-dev \
	pkg-config python3 man-db clang libclang-rt-14-dev libtcmalloc-minimal4 python3-markdown-it \
	python3-pandas python3-numpy python3-yaml python3-plotly python3-ijson python3-psutil python3-networkx

ifeq ($(filter deps clean distclean help uninstall,$(MAKECMDGOALS)),)
  $(foreach p,$(PKGS),$(if $(shell pkg-config --exists $(p) && echo y),,\
    $(error missing $(p): install the Debian package $(PKG_DEB_$(p)) (or run 'make deps'))))
  ifeq ($(wildcard $(CUDA_HOME)/include/cupti.h)$(wildcard $(CUDA_HOME)/extras/CUPTI/include/cupti.h),)
    $(error no CUPTI headers under CUDA_HOME=$(CUDA_HOME): install the CUDA toolkit (Debian: nvidia-cupti-dev / nvidia-cuda-toolkit) or set CUDA_HOME)
  endif
endif

CUDA_INC := -I$(CUDA_HOME)/include $(if $(wildcard $(CUDA_HOME)/extras/CUPTI/include),-I$(CUDA_HOME)/extras/CUPTI/include)

ifeq ($(DEBUG),1)
  OPT := -O0 -g3 -Werror
else
  OPT := -O2 -g
endif
ifneq ($(SAN),)
  OPT += -fsanitize=$(SAN) -fno-omit-frame-pointer
  SANLD := -fsanitize=$(SAN)
endif

# the stepprof version that token streams name (STEPPROF_RECORD_TOKENS)
SP_GIT_VERSION := $(shell git describe --always --dirty 2>/dev/null || echo unknown)
CFLAGS_COMMON := -DSP_GIT_VERSION='"$(SP_GIT_VERSION)"' -std=gnu11 $(OPT) -Wall -Wextra -Wno-unused-parameter -Wshadow -fno-omit-frame-pointer \
	-D_GNU_SOURCE -I. $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
# thread-local variables through TLS descriptors, not initial-exec: the library then needs no static
# TLS block and loads with dlopen too (CUDA_INJECTION64_PATH without LD_PRELOAD); preloaded, a
# descriptor resolves to a constant offset (docs/LIMITS.md, "dlopen"; aarch64 uses descriptors anyway)
TLS_DIALECT := $(if $(filter x86_64%,$(shell $(CC) -dumpmachine)),-mtls-dialect=gnu2)
LIB_CFLAGS := $(CFLAGS_COMMON) -fPIC -fvisibility=hidden $(TLS_DIALECT) -DSP_IN_LIBRARY
# the CLI, the tests and the pure rooms see no CUDA header (SP_PURE: the collector's internal headers refuse)
CLI_CFLAGS := $(CFLAGS_COMMON) -DSP_PURE
DEP_LIBS := $(shell pkg-config --libs $(filter-out $(CLI_PKGS),$(PKGS)) 2>/dev/null)
# the CLI also demangles C++ names with libstdc++'s __cxa_demangle (g++ provides libstdc++.so)
CLI_LIBS := $(DEP_LIBS) $(shell pkg-config --libs $(CLI_PKGS) 2>/dev/null) -lstdc++

# Rooms (docs/ARCHITECTURE.md). The pure rooms are host code shared by the library, the CLI and the unit
# tests: compiled without the CUDA include path and with SP_PURE, so an include of CUPTI or of the
# collector's internals there fails the build. The CUPTI-side rooms go into the library only.
PURE_DIRS := config trace decide collector/base collector/out collector/mem collector/stacks
CUPTI_DIRS := collector collector/cupti collector/hold collector/ondemand collector/pybridge
CORE_SRCS := $(wildcard $(addsuffix /*.c,$(PURE_DIRS)))
CUPTI_SRCS := $(wildcard $(addsuffix /*.c,$(CUPTI_DIRS)))
# Library only: hooks and the CUPTI side of the collector.
LIBONLY_SRCS := $(wildcard preload/*.c) $(CUPTI_SRCS)
CLI_SRCS := $(filter-out cli/main.c,$(wildcard cli/*.c))
TEST_SRCS := $(wildcard tests/unit/test_*.c)
TEST_BINS := $(patsubst tests/unit/%.c,$(O)/tests/%,$(TEST_SRCS))
HELPER_SRCS := $(filter-out tests/e2e/fakecupti.c tests/e2e/fakecudart.c tests/e2e/fakecuda.c \
	tests/e2e/dlnext_lib.c tests/e2e/fakenvtx.c tests/e2e/fakeinject.c,$(wildcard tests/e2e/*.c))
HELPER_BINS := $(patsubst tests/e2e/%.c,$(O)/tests/e2e/%,$(HELPER_SRCS)) $(O)/tests/e2e/libfakecupti.so \
	$(O)/tests/e2e/libfakecudart.so $(O)/tests/e2e/fakecuda/libcuda.so.1 $(O)/tests/e2e/libfakenvtx.so \
	$(O)/tests/e2e/libfakeinject.so

LIB_OBJS := $(patsubst %.c,$(O)/lib/%.o,$(CORE_SRCS) $(LIBONLY_SRCS))
CORE_OBJS := $(patsubst %.c,$(O)/host/%.o,$(CORE_SRCS) $(CLI_SRCS))

Q := $(if $(V),,@)

all: $(O)/libstepprof.so $(O)/libstepprof-nomalloc.so $(O)/stepprof

# a pure room's file gets no CUDA include path; the CUPTI side gets it
$(O)/lib/%.o: %.c
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  CC(lib) $<")
	$(Q)$(CC) $(LIB_CFLAGS) $(if $(filter $(CORE_SRCS),$<),-DSP_PURE,$(CUDA_INC)) -MMD -MP -c $< -o $@

# the malloc hooks' usual path is a comparison and a tail call: no frame to set up (kept under SAN)
$(O)/lib/preload/malloc.o: LIB_CFLAGS += $(if $(SAN),,-fomit-frame-pointer)

$(O)/host/%.o: %.c
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  CC      $<")
	$(Q)$(CC) $(CLI_CFLAGS) -MMD -MP -c $< -o $@

# preload/ sees the collector through collector/collector.h alone (scripts/check-includes.py): the
# libraries are not linked while a hook includes another header of collector/
$(O)/includes.ok: scripts/check-includes.py $(wildcard preload/*.c preload/*.h)
	@mkdir -p $(dir $@)
	$(Q)scripts/check-includes.py && touch $@

$(O)/libstepprof.so: $(LIB_OBJS) | $(O)/includes.ok
	$(if $(Q),@echo "  LD      $@")
	$(Q)$(CC) -shared -Wl,--no-undefined -Wl,-z,nodelete -Wl,-rpath,'$$ORIGIN' -o $@ $^ $(DEP_LIBS) -ldl -lpthread $(SANLD)

# the same library without the malloc hooks: what `stepprof run` preloads when host_malloc is off,
# so that a program's allocator calls reach libc directly (no interposition, no cost)
$(O)/libstepprof-nomalloc.so: $(filter-out $(O)/lib/preload/malloc.o,$(LIB_OBJS)) | $(O)/includes.ok
	$(if $(Q),@echo "  LD      $@")
	$(Q)$(CC) -shared -Wl,--no-undefined -Wl,-z,nodelete -Wl,-rpath,'$$ORIGIN' -o $@ $^ $(DEP_LIBS) -ldl -lpthread $(SANLD)

$(O)/libspcore.a: $(CORE_OBJS)
	$(Q)rm -f $@ && ar rcs $@ $^

$(O)/stepprof: $(O)/host/cli/main.o $(O)/libspcore.a
	$(if $(Q),@echo "  LD      $@")
	$(Q)$(CC) -Wl,-rpath,'$$ORIGIN/../lib:$$ORIGIN' -o $@ $^ $(CLI_LIBS) -lpthread -lm $(SANLD)

$(O)/tests/%: tests/unit/%.c $(O)/libspcore.a
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  TEST    $@")
	$(Q)$(CC) $(CLI_CFLAGS) $(shell pkg-config --cflags cmocka) -o $@ $< $(O)/libspcore.a \
		$(shell pkg-config --libs cmocka) $(CLI_LIBS) -lpthread -lm $(SANLD)

$(O)/tests/e2e/%: tests/e2e/%.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) -O1 -g -o $@ $< -lpthread

# a stand-in libcupti and a "CUDA program" driving it: the CUPTI life cycle without a GPU
$(O)/tests/e2e/libfakecupti.so: tests/e2e/fakecupti.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) -O1 -g -shared -fPIC $(CUDA_INC) -o $@ $< -lpthread
$(O)/tests/e2e/libfakecudart.so: tests/e2e/fakecudart.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) -O1 -g -shared -fPIC $(CUDA_INC) -o $@ $< -ldl
# a library that calls NVTX as libtorch_cuda does (the header-only NVTX 3)
$(O)/tests/e2e/libfakenvtx.so: tests/e2e/fakenvtx.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) -O1 -g -shared -fPIC $(CUDA_INC) -o $@ $< -ldl
# a stand-in driver, under its own name in a folder of its own
$(O)/tests/e2e/fakecuda/libcuda.so.1: tests/e2e/fakecuda.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) -O1 -g -shared -fPIC -Wl,-soname,libcuda.so.1 -Wl,-Bsymbolic-functions $(CUDA_INC) -o $@ $< -ldl
# another injection library, which stepprof chains (tests/e2e/crash.sh)
$(O)/tests/e2e/libfakeinject.so: tests/e2e/fakeinject.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) -O1 -g -shared -fPIC -o $@ $<
# dlsym(RTLD_NEXT) from a library under the preload: two libraries defining one symbol
$(O)/tests/e2e/libdlnext_a.so $(O)/tests/e2e/libdlnext_b.so: $(O)/tests/e2e/libdlnext_%.so: tests/e2e/dlnext_lib.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) -O0 -g -shared -fPIC -DWHICH='"$*"' -DLIB=$* -o $@ $< -ldl
$(O)/tests/e2e/dlnext: tests/e2e/dlnext.c $(O)/tests/e2e/libdlnext_a.so $(O)/tests/e2e/libdlnext_b.so
	$(Q)$(CC) -O0 -g -o $@ $< -L$(O)/tests/e2e -Wl,-rpath,'$$ORIGIN' -ldlnext_a -ldlnext_b -ldl
$(O)/tests/e2e/cupti_life_driver $(O)/tests/e2e/share_driver $(O)/tests/e2e/crash_driver: $(O)/tests/e2e/%: tests/e2e/%.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) -O1 -g $(CUDA_INC) -o $@ $< -ldl -lpthread
$(O)/tests/e2e/cupti_life_driver: tests/e2e/kineto_like.h
# a process that looks like CPython to the Python bridge: its symbols found with dlsym
$(O)/tests/e2e/pyfake: tests/e2e/pyfake.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) -O1 -g -rdynamic -o $@ $<

$(O)/tests/e2e/phases_driver: tests/e2e/phases_driver.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) -O1 -g $(CUDA_INC) -o $@ $< -ldl -lpthread

# gen_golden, gen_random, gen_ranks, gen_pytrace, gen_tokens, gen_ddp and gen_stream write traces through the core library
# (gen_hostile writes raw zstd chunks)
$(O)/tests/e2e/gen_golden $(O)/tests/e2e/gen_ops $(O)/tests/e2e/gen_cut $(O)/tests/e2e/gen_phases $(O)/tests/e2e/gen_random $(O)/tests/e2e/gen_ranks $(O)/tests/e2e/gen_pytrace $(O)/tests/e2e/gen_tokens $(O)/tests/e2e/gen_hostile $(O)/tests/e2e/gen_ddp $(O)/tests/e2e/gen_stream: $(O)/tests/e2e/%: tests/e2e/%.c $(O)/libspcore.a
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CLI_CFLAGS) -o $@ $< $(O)/libspcore.a $(CLI_LIBS) -lpthread $(SANLD)

# libFuzzer harnesses (tests/fuzz/): the core and the CLI built again with clang, ASan and UBSan.
FUZZ_CC ?= clang
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS := $(filter-out -O2 -O0 -g3 -Werror -fsanitize=%,$(CFLAGS_COMMON)) -DSP_PURE -O1 -g $(FUZZ_SAN) -fsanitize=fuzzer-no-link
FUZZ_NAMES := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BINS := $(patsubst %,$(O)/fuzz/fuzz_%,$(FUZZ_NAMES))
FUZZ_OBJS := $(patsubst %.c,$(O)/fuzz/obj/%.o,$(CORE_SRCS) $(CLI_SRCS))
FUZZ_SECONDS ?= 3600

check-clang:
	@command -v $(FUZZ_CC) >/dev/null && echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }' | \
		$(FUZZ_CC) -fsanitize=fuzzer -x c - -o /dev/null 2>/dev/null || \
		{ echo "missing libFuzzer: install the Debian packages clang and libclang-rt-14-dev (or run 'make deps')"; exit 1; }

$(O)/fuzz/obj/%.o: %.c | check-clang
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  CC(fuzz) $<")
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP -c $< -o $@

$(O)/fuzz/libspfuzz.a: $(FUZZ_OBJS)
	$(Q)rm -f $@ && ar rcs $@ $^

$(O)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(O)/fuzz/libspfuzz.a
	$(if $(Q),@echo "  FUZZ    $@")
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $^ $(CLI_LIBS) -lpthread -lm

.SECONDARY: $(FUZZ_OBJS)

fuzz-build: $(FUZZ_BINS)

# long runs: FUZZ_SECONDS in all, shared by the harnesses (tests/fuzz/run.sh says how)
fuzz: $(FUZZ_BINS)
	tests/fuzz/run.sh $(O) $(FUZZ_SECONDS) $(FUZZ_NAMES)

check-cmocka:
	@pkg-config --exists cmocka || { echo "missing cmocka: install the Debian package libcmocka-dev (or run 'make deps')"; exit 1; }

# the test library that a real CPython loads (tests/e2e/pystack.sh): the stack capture and the
# Python walker built as the preloaded library builds them
PYWALK_SRCS := tests/pywalk/pywalk.c collector/stacks/stacks.c collector/stacks/pystack.c collector/base/intern.c collector/base/log.c
$(O)/tests/libpywalk.so: $(PYWALK_SRCS)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(LIB_CFLAGS) -shared -o $@ $^ $(shell pkg-config --libs libunwind) -ldl -lpthread $(SANLD)

test: check-cmocka all $(O)/stepprof.1 $(TEST_BINS) $(HELPER_BINS) $(O)/tests/libpywalk.so $(FUZZ_BINS)
	@tests/run.sh $(O)

# a fresh clone of the committed HEAD in an empty folder (nothing beside it), `make test` there: 0 failed
# (tests/clone.sh; not inside `make test`, which it runs)
test-clone:
	@tests/clone.sh

# what one test script needs, without running any: SP_BUILD=$PWD/$(O) SP_ROOT=$PWD bash tests/e2e/X.sh
test-build: check-cmocka all $(O)/stepprof.1 $(TEST_BINS) $(HELPER_BINS) $(O)/tests/libpywalk.so

# the man page, generated from the help text (scripts/gen-man.sh)
$(O)/stepprof.1: $(O)/stepprof scripts/gen-man.sh
	$(Q)scripts/gen-man.sh $(O)/stepprof >$@.tmp && mv $@.tmp $@

# GPU tests and benchmark: only on a machine with an NVIDIA GPU (see docs/GPU-TESTS.md).
test-gpu: all
	tests/gpu/run.sh $(O)

demo: all
	scripts/demo.sh $(O)

bench: all
	bench/run.sh $(O)

# host benchmark of the trace readers: time and peak RSS of report/steps/convert/memory on one
# window of 1e6 and 1e7 records (docs/BENCHMARKS.md); CMP=DIR compares with another build
bench-host: all $(O)/tests/e2e/gen_ddp
	bench/reader_bench.sh $(O) $(CMP)

dist: all $(O)/stepprof.1
	scripts/make-dist.sh $(O) dist/stepprof

# PREFIX/bin/stepprof, PREFIX/lib/libstepprof*.so (the CLI finds them in ../lib), PREFIX/share:
# docs, recipes, man page, bash completion, demo. DESTDIR for packaging.
DOCDIR = $(DESTDIR)$(PREFIX)/share/doc/stepprof
install: all $(O)/stepprof.1
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib
	install -m 755 $(O)/stepprof $(DESTDIR)$(PREFIX)/bin/
	install -m 755 $(O)/libstepprof.so $(O)/libstepprof-nomalloc.so $(DESTDIR)$(PREFIX)/lib/
	$(MAKE) --no-print-directory install-share
	@echo "installed stepprof $(VERSION) in $(DESTDIR)$(PREFIX) (PATH: $(PREFIX)/bin; man stepprof)"

# what install and dist share: everything under PREFIX/share (the demo's trace: tests/data/demo/
# when the lead's GPU recording is there, else the golden trace)
DEMO_TRACE = $(firstword $(wildcard tests/data/demo/*.sptrace) tests/golden/small.sptrace)
install-share: $(O)/stepprof.1
	install -d $(DOCDIR)/recipes $(DESTDIR)$(PREFIX)/share/man/man1 \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/share/stepprof
	install -m 644 README.md LICENSE docs/*.md $(DOCDIR)/
	install -m 644 docs/recipes/*.ini $(DOCDIR)/recipes/
	install -m 644 $(O)/stepprof.1 $(DESTDIR)$(PREFIX)/share/man/man1/stepprof.1
	install -m 644 scripts/stepprof-completion.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/stepprof
	install -m 755 scripts/demo.sh $(DESTDIR)$(PREFIX)/share/stepprof/demo.sh
	install -m 644 tests/gpu/workload.cu $(DESTDIR)$(PREFIX)/share/stepprof/workload.cu
	install -m 644 $(DEMO_TRACE) $(DESTDIR)$(PREFIX)/share/stepprof/demo.sptrace

# then the folders install made, those left empty only (deepest first; PREFIX itself stays)
INSTALL_DIRS = share/man/man1 share/man share/bash-completion/completions share/bash-completion share/doc share bin lib
uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/stepprof $(DESTDIR)$(PREFIX)/lib/libstepprof.so \
		$(DESTDIR)$(PREFIX)/lib/libstepprof-nomalloc.so $(DESTDIR)$(PREFIX)/share/man/man1/stepprof.1 \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions/stepprof
	rm -rf $(DOCDIR) $(DESTDIR)$(PREFIX)/share/stepprof
	-@for d in $(INSTALL_DIRS); do [ -d "$(DESTDIR)$(PREFIX)/$$d" ] && rmdir --ignore-fail-on-non-empty "$(DESTDIR)$(PREFIX)/$$d"; done; true

help:
	@echo "stepprof $(VERSION) - targets:"
	@echo "  make              build/libstepprof.so, build/libstepprof-nomalloc.so, build/stepprof"
	@echo "  make deps         install the Debian build and test packages (root; apt-get)"
	@echo "  make test         every host test, no GPU needed; ends with 'N skipped; N passed, N failed'"
	@echo "  make test-clone   clone the committed HEAD into an empty folder and run make test there"
	@echo '  make test-build   build what the host tests need, run none (one script: SP_BUILD=$$PWD/build SP_ROOT=$$PWD bash tests/e2e/X.sh)'
	@echo "  make demo         GPU: profile the bundled workload; no GPU: the report of a shipped GPU trace"
	@echo "  make install      PREFIX=$(PREFIX): bin, lib, share/doc, man page, bash completion (DESTDIR too)"
	@echo "  make uninstall    remove what install put under PREFIX"
	@echo "  make dist         dist/stepprof/: self-contained copy (bundled libraries, docs, demo) for GPU machines"
	@echo "  make test-gpu     GPU machine: the GPU test suite (docs/GPU-TESTS.md)"
	@echo "  make bench        GPU machine: overhead benchmarks (docs/BENCHMARKS.md)"
	@echo "  make bench-host   time and peak RSS of the trace readers at 1e6/1e7 records (CMP=DIR: vs a build)"
	@echo "  make format       clang-format the sources (clang-format 16 or later)"
	@echo "  make format-check how many lines make format would change, by file"
	@echo "  make check-sizes  .c files over 800 lines, functions over 80 lines, in every product folder (CI runs it);\n                    preload/ including a collector/ header other than collector.h"
	@echo "  make clean        remove build/ and dist/"
	@echo "options: DEBUG=1 (-O0 -g3 -Werror), SAN=address,undefined, CUDA_HOME=$(CUDA_HOME), V=1 (show commands)"

deps:
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(DEBS) make gcc

# clang-format 16 or later: .clang-format keeps trailing comments where they are (AlignTrailingComments
# Kind: Leave), which older versions cannot. Debian 12: apt-get install clang-format-19.
CLANG_FORMAT ?= $(or $(firstword $(foreach v,22 21 20 19 18 17 16,$(shell command -v clang-format-$(v)))),clang-format)
FORMAT_SRCS = $(wildcard */*.c */*.h tests/*/*.c)
check-clang-format:
	@v=$$($(CLANG_FORMAT) --version 2>/dev/null | sed -n 's/.*version \([0-9]*\).*/\1/p'); \
	[ -n "$$v" ] && [ "$$v" -ge 16 ] || \
		{ echo "make format needs clang-format 16 or later (found: $${v:-none}): install the Debian package clang-format-19 or set CLANG_FORMAT"; exit 1; }
format: check-clang-format
	$(CLANG_FORMAT) -i $(FORMAT_SRCS)
# what `make format` would change, without changing it: the changed lines per file, then the total
format-check: check-clang-format
	@for f in $(FORMAT_SRCS); do n=$$($(CLANG_FORMAT) $$f | diff -U0 $$f - | grep -c '^[-+][^-+]'); \
		[ $$n = 0 ] || echo "$$n $$f"; done | sort -rn | awk '{ print; t += $$1 } END { print t + 0, "lines would change" }'
# the size rules (docs/ARCHITECTURE.md): .c files of at most 800 lines, functions in collector/ and preload/
# of at most 80
check-sizes:
	@scripts/check-sizes.py
	@scripts/check-includes.py

clean:
	rm -rf $(O) dist

.PHONY: all test test-clone test-build test-gpu bench bench-host demo dist deps clean format format-check check-clang-format check-sizes check-cmocka install install-share uninstall help \
	check-clang fuzz fuzz-build
-include $(shell find $(O) -name '*.d' 2>/dev/null)
