# ngx_llm -- builds the engine library, the `llm` CLI and the nginx module.
#
#   make            build/libllm.a, build/llm, build/ngx_http_llm_module.so
#   make run        install what is missing, build, serve the demo model on 127.0.0.1:8000
#   make demo-model train the demo model into build/demo-model (once: cached)
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
CFLAGS    += $(CFLAGS_BASE) -Iengine/include -Iengine
LIBS       = -lyajl -lpcre2-8 -lutf8proc -ldl -lpthread -lm

# Kernels compiled once per instruction set; the CPU backend picks one at run time.
KERNEL_SRCS   = $(wildcard engine/cpu/cpu_kernels_*.c)
ifneq ($(shell uname -m),x86_64)
KERNEL_ISA_SRCS = engine/cpu/cpu_kernels_generic.c
else
KERNEL_ISA_SRCS = $(KERNEL_SRCS)
endif
ENGINE_SRCS   = $(filter-out $(KERNEL_SRCS),$(wildcard engine/*.c engine/*/*.c))
ENGINE_HDRS   = $(wildcard engine/*.h engine/*/*.h)
ENGINE_OBJS   = $(ENGINE_SRCS:%.c=$(BUILD)/%.o) $(KERNEL_ISA_SRCS:%.c=$(BUILD)/%.o)
TOOL_SRCS     = $(wildcard tools/*.c)
UNIT_SRCS     = $(wildcard t/unit/*.c)
UNIT_BINS     = $(UNIT_SRCS:t/unit/%.c=$(BUILD)/t/%)

KFLAGS_avx512 = -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mfma \
                -mf16c -mavx2 -mamx-tile -mamx-int8 -mamx-bf16 -mavx512bf16
KFLAGS_avx2   = -mavx2 -mfma -mf16c
KFLAGS_generic =

# CUDA backend: compiled whenever nvcc exists (see cuda/, docs/cuda.md).
NVCC      ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
# A100 and H100/H200 machine code, plus PTX that newer GPUs compile at load.
CUDA_ARCH ?= -gencode arch=compute_80,code=sm_80 \
             -gencode arch=compute_90a,code=sm_90a \
             -gencode arch=compute_80,code=compute_80
NVCCFLAGS  = -O3 -std=c++17 $(CUDA_ARCH) -Iengine/include -Iengine -Icuda \
             -Xcompiler -fPIC,-fvisibility=hidden
# host code of the backend (plain C, also tested without CUDA) and of its
# tests (the host reference, random in-memory models)
CUDA_C_OBJS    = $(patsubst %.c,$(BUILD)/%.o,cuda/cu_plan.c cuda/cu_weights.c \
                 cuda/cu_forward.c cuda/cu_util.c)
CUDA_TEST_OBJS = $(patsubst %.c,$(BUILD)/%.o,cuda/cu_ref.c cuda/cu_testmodel.c)
CUDA_CU_OBJS   = $(patsubst %.cu,$(BUILD)/%.o,$(wildcard cuda/*.cu))
CUDA_LIBS      = -Xlinker -rpath=$(CUDA_HOME)/lib64 -lcublas -lcublasLt

.PHONY: all lib cli module unit test run deps asan clean bench fuzz-jinja fuzz-tokenizer fuzz-gguf fuzz-http \
	check-layers test-build test-under-load demo-model \
	template-bench cuda

all: lib cli module
ifneq ($(NVCC),)
ifeq ($(SANITIZE),)
all: cuda
endif
endif

lib: $(BUILD)/libllm.a
cli: $(BUILD)/llm
unit: $(UNIT_BINS)

$(BUILD)/libllm.a: $(ENGINE_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(BUILD)/engine/cpu/cpu_kernels_%.o: engine/cpu/cpu_kernels_%.c $(ENGINE_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(KFLAGS_$*) -O3 -c $< -o $@

$(BUILD)/engine/%.o: engine/%.c $(ENGINE_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/llm: $(TOOL_SRCS) $(wildcard tools/*.h) $(BUILD)/libllm.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itools -o $@ $(TOOL_SRCS) $(BUILD)/libllm.a $(LDFLAGS) $(LIBS)

$(BUILD)/t/%: t/unit/%.c $(wildcard t/unit/*.h) $(BUILD)/libllm.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -It/unit -o $@ $< $(BUILD)/libllm.a $(LDFLAGS) $(LIBS)

$(BUILD)/cuda/%.o: cuda/%.c $(wildcard cuda/*.h) $(ENGINE_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Icuda -c $< -o $@

$(BUILD)/t/test_cuda_ref: t/unit/test_cuda_ref.c $(CUDA_C_OBJS) $(CUDA_TEST_OBJS) $(BUILD)/libllm.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -It/unit -Icuda -o $@ $< $(CUDA_C_OBJS) $(CUDA_TEST_OBJS) $(BUILD)/libllm.a $(LDFLAGS) $(LIBS)

# The CUDA backend's sources on the CPU (cuda/emu: an emulated device,
# runtime and cuBLAS), so that make test runs its kernels without nvcc or a
# GPU: t/gpu/test_kernels.c built against the emulator.
CXX           ?= g++
CUDA_EMU_OBJS  = $(patsubst cuda/%.cu,$(BUILD)/emu/%.o,$(wildcard cuda/*.cu)) \
                 $(BUILD)/emu/cu_emu.o
CXXFLAGS_EMU   = -std=c++20 $(OPT) -g -fPIC -pthread -DLLM_CU_EMU -Icuda/emu \
                 -U_FORTIFY_SOURCE \
                 -Icuda -Iengine/include -Iengine -Wall -Wno-unused-parameter \
                 -Wno-unused-function -Wno-unknown-pragmas -fno-strict-aliasing
ifeq ($(SANITIZE),)
unit: $(BUILD)/t/test_cuda_emu $(BUILD)/emu/libllm_cuda.so $(BUILD)/gpu/e2e
endif

$(BUILD)/emu/%.o: cuda/%.cu $(wildcard cuda/*.h cuda/*.cuh cuda/emu/*.h) $(ENGINE_HDRS)
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_EMU) -x c++ -c $< -o $@

$(BUILD)/emu/cu_emu.o: cuda/emu/cu_emu.cpp $(wildcard cuda/emu/*.h)
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_EMU) -c $< -o $@

$(BUILD)/t/test_cuda_emu: t/gpu/test_kernels.c $(wildcard t/gpu/*.h) $(CUDA_EMU_OBJS) $(CUDA_C_OBJS) $(CUDA_TEST_OBJS) $(BUILD)/libllm.a
	@mkdir -p $(dir $@) $(BUILD)/emu
	$(CC) $(CFLAGS) -DLLM_CU_EMU -Icuda/emu -Icuda -c $< -o $(BUILD)/emu/test_kernels.o
	$(CXX) -pthread -o $@ $(BUILD)/emu/test_kernels.o $(CUDA_EMU_OBJS) \
	    $(CUDA_C_OBJS) $(CUDA_TEST_OBJS) $(BUILD)/libllm.a $(LDFLAGS) $(LIBS)

# the benchmark on the emulator (only to try t/gpu/run.sh: LLM_GPU_EMU=1)
$(BUILD)/emu/bench: t/gpu/bench.c $(CUDA_EMU_OBJS) $(CUDA_C_OBJS) $(BUILD)/libllm.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DLLM_CU_EMU -Icuda/emu -Icuda -c $< -o $@.o
	$(CXX) -pthread -o $@ $@.o $(CUDA_EMU_OBJS) $(CUDA_C_OBJS) \
	    $(BUILD)/libllm.a $(LDFLAGS) $(LIBS)

# libllm_cuda.so on the emulator: the GPU path through the engine and the
# CLI, end to end, on the CPU (t/cuda_emu.t, LLM_CUDA_LIBRARY)
$(BUILD)/emu/libllm_cuda.so: $(CUDA_EMU_OBJS) $(CUDA_C_OBJS) cuda/exports.map
	$(CXX) -shared -pthread -o $@ $(CUDA_EMU_OBJS) $(CUDA_C_OBJS) \
	    -Wl,--version-script=cuda/exports.map

# The CUDA backend (needs nvcc, not a GPU) and its GPU checks (t/gpu/run.sh).
cuda: $(BUILD)/libllm_cuda.so $(BUILD)/gpu/test_kernels $(BUILD)/gpu/bench \
      $(BUILD)/gpu/e2e

$(BUILD)/cuda/%.o: cuda/%.cu $(wildcard cuda/*.h cuda/*.cuh) $(ENGINE_HDRS)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(BUILD)/libllm_cuda.so: $(CUDA_CU_OBJS) $(CUDA_C_OBJS) cuda/exports.map
	$(NVCC) $(CUDA_ARCH) -shared -o $@ $(CUDA_CU_OBJS) $(CUDA_C_OBJS) \
	    -Xlinker --version-script=cuda/exports.map $(CUDA_LIBS)

# e2e goes through llm_backend_open(), which dlopens libllm_cuda.so
$(BUILD)/gpu/e2e: t/gpu/e2e.c $(BUILD)/libllm.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libllm.a $(LDFLAGS) $(LIBS)

$(BUILD)/gpu/%: t/gpu/%.c $(wildcard t/gpu/*.h) $(CUDA_CU_OBJS) $(CUDA_C_OBJS) $(CUDA_TEST_OBJS) $(BUILD)/libllm.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Icuda -I$(CUDA_HOME)/include -c $< -o $@.o
	$(NVCC) $(CUDA_ARCH) -o $@ $@.o $(CUDA_CU_OBJS) $(CUDA_C_OBJS) \
	    $(CUDA_TEST_OBJS) $(BUILD)/libllm.a $(CUDA_LIBS) $(LIBS)

# The nginx module, built against Debian's nginx-dev (or NGINX_SRC=).
module: $(BUILD)/ngx_http_llm_module.so
$(BUILD)/ngx_http_llm_module.so: $(BUILD)/libllm.a config $(wildcard ngx_module/*.c ngx_module/*.h)
	tools/build_module.sh $(BUILD) "$(SANITIZE)"

deps:
	tools/install_deps.sh

test: deps
	$(MAKE) test-build
	tools/run_tests.sh $(BUILD)

# what the tests run: the layer check, every binary, the ASan builds, the
# demo model
test-build:
	$(MAKE) check-layers
	$(MAKE) all unit
	$(MAKE) asan
	$(MAKE) demo-model

# the integration tests while busy loops hold every core (CI is busy too)
test-under-load: deps
	$(MAKE) test-build
	tools/test_under_load.sh $(BUILD)

run: deps
	$(MAKE) all demo-model
	tools/run_demo.sh $(BUILD)

# The demo model: a small Llama trained here on Debian's fortunes
# (tools/demo_model.py, docs/models.md); trained again only when the recipe
# changes.
demo-model: $(BUILD)/demo-model/training.json
$(BUILD)/demo-model/training.json: tools/demo_model.py tools/make_demo_model.sh
	tools/make_demo_model.sh $(BUILD)/demo-model

# the engine's one-way dependencies and the module's one seam, llm.h
# (docs/architecture.md)
check-layers:
	tools/check_layers.sh

asan:
	$(MAKE) BUILD=build/asan SANITIZE=address OPT=-O1 all unit

bench: all
	bench/run.sh $(BUILD)

# libFuzzer runs over the chat template engine (docs/chat-templates.md) and
# the tokenizer (docs/tokenizer.md).
FUZZ_SECONDS ?= 60
fuzz-jinja fuzz-tokenizer fuzz-gguf:
	t/fuzz.sh $(@:fuzz-%=%) $(BUILD) $(FUZZ_SECONDS)

# The HTTP-level fuzzer of t/api_fuzz.t, longer and with a new seed each
# time (printed; LLM_FUZZ_HTTP_SEED=N replays a run): docs/fuzzing.md.
FUZZ_HTTP_RUNS ?= 50000
fuzz-http: all
	@seed=$${LLM_FUZZ_HTTP_SEED:-$$(date +%s)}; \
	echo "fuzz-http: seed $$seed, $(FUZZ_HTTP_RUNS) cases"; \
	LLM_FUZZ_HTTP_SEED=$$seed LLM_FUZZ_HTTP_RUNS=$(FUZZ_HTTP_RUNS) \
	    tools/run_tests.sh $(BUILD) t/api_fuzz.t; \
	status=$$?; echo "fuzz-http: seed $$seed"; exit $$status

# Chat template rendering latency, 50-message conversation (docs/chat-templates.md).
template-bench: $(BUILD)/template_bench
	$(BUILD)/template_bench
$(BUILD)/template_bench: bench/template_bench.c $(BUILD)/libllm.a
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libllm.a $(LDFLAGS) $(LIBS)

clean:
	rm -rf build
