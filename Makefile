# ngx_llm -- builds the engine library, the `llm` CLI and the nginx module.
#
#   make            build/libllm.a, build/llm, build/ngx_http_llm_module.so
#   make run        install what is missing, build, serve the demo model on 127.0.0.1:8000
#   make test       install what is missing, build, run every test
#   make asan       the same binaries under AddressSanitizer in build/asan/
#
# BUILD=dir and SANITIZE=address select another build directory / sanitizer.

CC        ?= gcc
BUILD     ?= build
SANITIZE  ?=
OPT       ?= -O2

CFLAGS_BASE = -std=gnu11 $(OPT) -g -fPIC -pthread -Wall -Wextra \
              -Wno-unused-parameter -Wno-missing-field-initializers \
              -fno-strict-aliasing
ifneq ($(SANITIZE),)
CFLAGS_BASE += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer
LDFLAGS     += -fsanitize=$(SANITIZE)
endif
CFLAGS    += $(CFLAGS_BASE) -Iengine
LIBS       = -lyajl -lpcre2-8 -lutf8proc -ldl -lpthread -lm

# Kernels compiled once per instruction set; the CPU backend picks one at run time.
KERNEL_SRCS   = $(wildcard engine/cpu_kernels_*.c)
ifneq ($(shell uname -m),x86_64)
KERNEL_ISA_SRCS = engine/cpu_kernels_generic.c
else
KERNEL_ISA_SRCS = $(KERNEL_SRCS)
endif
ENGINE_SRCS   = $(filter-out $(KERNEL_SRCS),$(wildcard engine/*.c))
ENGINE_OBJS   = $(ENGINE_SRCS:%.c=$(BUILD)/%.o) $(KERNEL_ISA_SRCS:%.c=$(BUILD)/%.o)
TOOL_SRCS     = $(wildcard tools/*.c)
UNIT_SRCS     = $(wildcard t/unit/*.c)
UNIT_BINS     = $(UNIT_SRCS:t/unit/%.c=$(BUILD)/t/%)

KFLAGS_avx512 = -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -mf16c -mavx2
KFLAGS_avx2   = -mavx2 -mfma -mf16c
KFLAGS_generic =

# CUDA backend: compiled whenever nvcc exists (see cuda/).
NVCC      ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)

.PHONY: all lib cli module unit test run deps asan clean bench

all: lib cli module

lib: $(BUILD)/libllm.a
cli: $(BUILD)/llm
unit: $(UNIT_BINS)

$(BUILD)/libllm.a: $(ENGINE_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(BUILD)/engine/cpu_kernels_%.o: engine/cpu_kernels_%.c engine/*.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(KFLAGS_$*) -O3 -c $< -o $@

$(BUILD)/engine/%.o: engine/%.c engine/*.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/llm: $(TOOL_SRCS) $(wildcard tools/*.h) $(BUILD)/libllm.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itools -o $@ $(TOOL_SRCS) $(BUILD)/libllm.a $(LDFLAGS) $(LIBS)

$(BUILD)/t/%: t/unit/%.c $(wildcard t/unit/*.h) $(BUILD)/libllm.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -It/unit -o $@ $< $(BUILD)/libllm.a $(LDFLAGS) $(LIBS)

# The nginx module, built against Debian's nginx-dev (or NGINX_SRC=).
module: $(BUILD)/ngx_http_llm_module.so
$(BUILD)/ngx_http_llm_module.so: $(BUILD)/libllm.a config $(wildcard ngx_module/*.c ngx_module/*.h)
	tools/build_module.sh $(BUILD) "$(SANITIZE)"

deps:
	tools/install_deps.sh

test: deps
	$(MAKE) all unit
	tools/run_tests.sh $(BUILD)

run: deps
	$(MAKE) all
	tools/run_demo.sh $(BUILD)

asan:
	$(MAKE) BUILD=build/asan SANITIZE=address OPT=-O1 all unit

bench: all
	bench/run.sh $(BUILD)

clean:
	rm -rf build
