# stepprof - build. `make` builds build/libstepprof.so and build/stepprof; `make test` runs the
# host tests; `make demo` profiles the bundled CUDA workload (GPU); `make dist` makes dist/stepprof/ (self-contained); `make deps` installs Debian packages.
# Options: DEBUG=1 (-O0 -g3 -Werror), SAN=address,undefined, CUDA_HOME=/usr/local/cuda, V=1.

CUDA_HOME ?= /usr/local/cuda
CC ?= gcc
O := build
PKGS := inih libzstd libunwind zlib libdw libelf libdeflate
# offline symbolisation, and libdeflate's fast CRC-32 for convert's gzip: linked into the CLI and
# the tests, never into the preloaded library
CLI_PKGS := libdw libelf libdeflate
# Debian package that provides each pkg-config module
PKG_DEB_inih := libinih-dev
PKG_DEB_libzstd := libzstd-dev
PKG_DEB_libunwind := libunwind-dev
PKG_DEB_zlib := zlib1g-dev
PKG_DEB_libdw := libdw-dev
PKG_DEB_libelf := libelf-dev
PKG_DEB_cmocka := libcmocka-dev
PKG_DEB_libdeflate := libdeflate-dev
DEBS := libinih-dev libzstd-dev libunwind-dev zlib1g-dev libdw-dev libelf-dev libdeflate-dev g++ libcmocka-dev pkg-config python3 \
	python3-pandas python3-numpy python3-yaml python3-plotly python3-ijson python3-psutil python3-networkx
# (the python3-* modules run HTA, ../shared/tools/hta, in tests/e2e/cli_kineto.sh)

ifeq ($(filter deps clean distclean help,$(MAKECMDGOALS)),)
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

CFLAGS_COMMON := -std=gnu11 $(OPT) -Wall -Wextra -Wno-unused-parameter -Wshadow -fno-omit-frame-pointer \
	-D_GNU_SOURCE -I. $(CUDA_INC) $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LIB_CFLAGS := $(CFLAGS_COMMON) -fPIC -fvisibility=hidden -ftls-model=initial-exec -DSP_IN_LIBRARY
CLI_CFLAGS := $(CFLAGS_COMMON)
DEP_LIBS := $(shell pkg-config --libs $(filter-out $(CLI_PKGS),$(PKGS)) 2>/dev/null)
# the CLI also demangles C++ names with libstdc++'s __cxa_demangle (g++ provides libstdc++.so)
CLI_LIBS := $(DEP_LIBS) $(shell pkg-config --libs $(CLI_PKGS) 2>/dev/null) -lstdc++

# Core: host code shared by the library, the CLI and the unit tests (no CUPTI calls).
CORE_SRCS := $(wildcard config/*.c) $(wildcard trace/*.c) $(filter-out collector/cupti%.c collector/collector.c,$(wildcard collector/*.c))
# Library only: hooks and the CUPTI side of the collector.
LIBONLY_SRCS := $(wildcard preload/*.c) $(wildcard collector/cupti*.c) $(wildcard collector/collector.c)
CLI_SRCS := $(filter-out cli/main.c,$(wildcard cli/*.c))
TEST_SRCS := $(wildcard tests/unit/test_*.c)
TEST_BINS := $(patsubst tests/unit/%.c,$(O)/tests/%,$(TEST_SRCS))
HELPER_SRCS := $(wildcard tests/e2e/*.c)
HELPER_BINS := $(patsubst tests/e2e/%.c,$(O)/tests/e2e/%,$(HELPER_SRCS))

LIB_OBJS := $(patsubst %.c,$(O)/lib/%.o,$(CORE_SRCS) $(LIBONLY_SRCS))
CORE_OBJS := $(patsubst %.c,$(O)/host/%.o,$(CORE_SRCS) $(CLI_SRCS))

Q := $(if $(V),,@)

all: $(O)/libstepprof.so $(O)/libstepprof-nomalloc.so $(O)/stepprof

$(O)/lib/%.o: %.c
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  CC(lib) $<")
	$(Q)$(CC) $(LIB_CFLAGS) -MMD -MP -c $< -o $@

# the malloc hooks' usual path is a comparison and a tail call: no frame to set up (kept under SAN)
$(O)/lib/preload/malloc.o: LIB_CFLAGS += $(if $(SAN),,-fomit-frame-pointer)

$(O)/host/%.o: %.c
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  CC      $<")
	$(Q)$(CC) $(CLI_CFLAGS) -MMD -MP -c $< -o $@

$(O)/libstepprof.so: $(LIB_OBJS)
	$(if $(Q),@echo "  LD      $@")
	$(Q)$(CC) -shared -Wl,--no-undefined -Wl,-z,nodelete -Wl,-rpath,'$$ORIGIN' -o $@ $^ $(DEP_LIBS) -ldl -lpthread $(SANLD)

# the same library without the malloc hooks: what `stepprof run` preloads when host_malloc is off,
# so that a program's allocator calls reach libc directly (no interposition, no cost)
$(O)/libstepprof-nomalloc.so: $(filter-out $(O)/lib/preload/malloc.o,$(LIB_OBJS))
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

# gen_golden, gen_random and gen_ddp write traces through the core library
$(O)/tests/e2e/gen_golden $(O)/tests/e2e/gen_random $(O)/tests/e2e/gen_ddp: $(O)/tests/e2e/%: tests/e2e/%.c $(O)/libspcore.a
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CLI_CFLAGS) -o $@ $< $(O)/libspcore.a $(CLI_LIBS) -lpthread $(SANLD)

check-cmocka:
	@pkg-config --exists cmocka || { echo "missing cmocka: install the Debian package libcmocka-dev (or run 'make deps')"; exit 1; }

test: check-cmocka all $(TEST_BINS) $(HELPER_BINS)
	@tests/run.sh $(O)

# GPU tests and benchmark: only on a machine with an NVIDIA GPU (see docs/GPU-TESTS.md).
test-gpu: all
	tests/gpu/run.sh $(O)

demo: all
	scripts/demo.sh $(O)

bench: all
	bench/run.sh $(O)

dist: all
	scripts/make-dist.sh $(O) dist/stepprof

deps:
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(DEBS) make gcc

format:
	clang-format -i $(wildcard */*.c */*.h tests/*/*.c)

clean:
	rm -rf $(O) dist

.PHONY: all test test-gpu bench demo dist deps clean format check-cmocka
-include $(shell find $(O) -name '*.d' 2>/dev/null)
