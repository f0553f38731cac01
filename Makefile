# olmo.c build. `make` builds $(BUILD)/olmo; `make tests` builds the C test programs;
# BUILD=dir puts objects and binaries elsewhere (default build/).
# `make test` runs the whole suite (see scripts/test.sh, which also installs deps).
CC ?= gcc
# `make` builds `all`, also when the CUDA test rules below come first (nvcc present).
.DEFAULT_GOAL := all
BUILD ?= build
CFLAGS ?= -O3 -march=native
CFLAGS += -std=c11 -D_GNU_SOURCE -Wall -Wextra -fopenmp -fno-math-errno -fno-trapping-math -Isrc -I/usr/include/cjson -MMD -MP
LDLIBS := -lopenblas -lpcre2-8 -lcjson -lyaml -lzstd -lz -lcrypto -lm -lpthread
LDFLAGS += -fopenmp
# MPI=1 (default): data parallelism over OpenMPI (`mpirun -np W build/olmo train ...`).
# MPI=0 builds without it (world size 1). Flags from pkg-config, with Debian's paths as fallback.
MPI ?= 1
ifeq ($(MPI),1)
MPI_CFLAGS := $(shell pkg-config --cflags ompi-c 2>/dev/null || echo -I/usr/lib/x86_64-linux-gnu/openmpi/include)
MPI_LIBS := $(shell pkg-config --libs ompi-c 2>/dev/null || echo -L/usr/lib/x86_64-linux-gnu/openmpi/lib -lmpi)
CFLAGS += -DOLMO_MPI $(MPI_CFLAGS)
LDLIBS += $(MPI_LIBS)
endif

# CUDA backend (docs/cuda.md): built when nvcc is found (PATH, else /usr/local/cuda/bin/nvcc);
# CUDA=0 turns it off, CUDA=1 insists. Sanitizer builds (-fsanitize in CFLAGS/LDFLAGS) default
# to CUDA=0: ASan and the CUDA runtime do not mix, and they would compile the kernels twice.
# CUDA_EMU=1: the same .cu files built for the emulated device of tests/cuemu (each CUDA
# thread a fiber, cuBLASLt and NCCL-over-MPI in software; docs/cuda.md "Emulation"), so the
# CUDA backend runs on a machine without a GPU: `make CUDA_EMU=1 BUILD=build-emu`.
CUDA_EMU ?= 0
ifeq ($(CUDA_EMU),1)
NVCC := tests/cuemu/nvcc
CUDA := 1
NCCL := $(MPI)
endif
ifeq ($(origin NVCC),undefined)
NVCC := $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
endif
ifneq (,$(findstring -fsanitize,$(CFLAGS) $(LDFLAGS)))
CUDA ?= 0
endif
ifneq ($(NVCC),)
CUDA ?= 1
endif
CUDA ?= 0
CU_OBJ :=
ifeq ($(CUDA),1)
# No --use_fast_math: it would not change any summation order (determinism holds either
# way) but __expf/approximate division cost the fp32 mode its 1e-5 parity with the CPU.
NVCCFLAGS ?= -O3
NVCCFLAGS += -std=c++17 -Isrc -gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=sm_80
CFLAGS += -DOLMO_CUDA
CU_SRC := $(sort $(wildcard src/kernels/cuda/*.cu src/train/cuda/*.cu))
CU_OBJ := $(CU_SRC:%.cu=$(BUILD)/%.cu.o)
ifeq ($(CUDA_EMU),1)
EMU_SRC := $(sort $(wildcard tests/cuemu/*.cpp))
ifneq ($(NCCL),1)
EMU_SRC := $(filter-out tests/cuemu/nccl.cpp,$(EMU_SRC))
endif
CU_OBJ += $(EMU_SRC:%.cpp=$(BUILD)/%.o)
LDLIBS += -lstdc++
$(CU_SRC:%.cu=$(BUILD)/%.cu.o): tests/cuemu/nvcc tests/cuemu/cuemu_rewrite.py
else
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
LDLIBS += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublasLt -lcudart -lstdc++
endif
# NCCL (multi-GPU ZeRO-1 on the devices, docs/cuda.md): used when nccl.h is found under
# $(CUDA_HOME)/include or /usr/include; NCCL=0 turns it off. Without it, mpirun with
# train.backend=cuda falls back to the host-MPI step (gradients and Adam on the CPU).
ifeq ($(origin NCCL),undefined)
NCCL := $(if $(wildcard $(CUDA_HOME)/include/nccl.h /usr/include/nccl.h),1,0)
endif
ifeq ($(NCCL),1)
CFLAGS += -DOLMO_NCCL
NVCCFLAGS += -DOLMO_NCCL
ifneq ($(CUDA_EMU),1)
LDLIBS += -lnccl
endif
endif
endif

SRC := $(shell find src -name '*.c' ! -path src/cli/main.c ! -path 'src/kernels/cuda/*' | sort)
# Files named *_cuda.c are the CUDA backend's C side (train/cuda/backend_cuda.c), built only
# with CUDA; *_nocuda.c stand in for it without (kernels/ops_nocuda.c).
ifeq ($(CUDA),1)
SRC := $(filter-out %_nocuda.c,$(SRC))
else
SRC := $(filter-out %_cuda.c,$(SRC))
endif
OBJ := $(SRC:%.c=$(BUILD)/%.o) $(CU_OBJ)
TEST_SRC := $(wildcard tests/*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
# CUDA test programs (tests/*.cu): built with the CUDA backend, real or emulated
ifeq ($(CUDA),1)
TEST_CU_BIN := $(patsubst tests/%.cu,$(BUILD)/tests/%,$(wildcard tests/*.cu))
TEST_BIN += $(TEST_CU_BIN)
$(TEST_CU_BIN): $(BUILD)/tests/%: $(BUILD)/tests/%.cu.o $(BUILD)/libolmo.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
endif

all: $(BUILD)/olmo tests

$(BUILD)/olmo: $(BUILD)/src/cli/main.o $(BUILD)/libolmo.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# `olmo --version`: the commit the binary is built from (git describe; "unknown" outside a
# git checkout). The stamp file changes only when the commit does, so main.o is rebuilt then.
GIT_REV := $(shell git describe --always --dirty 2>/dev/null || echo unknown)
$(BUILD)/git-rev.txt: FORCE
	@mkdir -p $(BUILD); echo '$(GIT_REV)' | cmp -s - $@ || echo '$(GIT_REV)' > $@
$(BUILD)/src/cli/main.o: $(BUILD)/git-rev.txt
$(BUILD)/src/cli/main.o: CFLAGS += -DOLMO_GIT_REV='"$(GIT_REV)"'
.PHONY: FORCE
FORCE:
# The flags every object is compiled and linked with, stamped like the commit: a build dir
# switched between `make` and `make CUDA=0` (or MPI=0, other CFLAGS) recompiles everything
# instead of linking objects of both builds into one binary.
BUILD_FLAGS := $(CC) $(CFLAGS) | $(NVCC) $(NVCCFLAGS) | $(CXX) | $(LDFLAGS) $(LDLIBS) | CUDA=$(CUDA) CUDA_EMU=$(CUDA_EMU) NCCL=$(NCCL)
$(BUILD)/flags.txt: FORCE
	@mkdir -p $(BUILD); echo '$(BUILD_FLAGS)' | cmp -s - $@ || echo '$(BUILD_FLAGS)' > $@
$(OBJ) $(BUILD)/src/cli/main.o $(TEST_SRC:tests/%.c=$(BUILD)/tests/%.o) $(TEST_CU_BIN:%=%.cu.o): $(BUILD)/flags.txt

$(BUILD)/libolmo.a: $(OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -MMD -MP -MF $(@:.o=.d) -c -o $@ $<

$(BUILD)/tests/cuemu/%.o: tests/cuemu/%.cpp
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -O2 -g -fopenmp -Wall -Wextra -Wno-unused-parameter -Itests/cuemu/include -Itests/cuemu $(MPI_CFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

# The AMX kernels need the AMX/AVX512-BF16 instruction sets whatever -march says; they
# run only after a runtime CPUID check (src/kernels/cpu/bf16.c).
$(BUILD)/src/kernels/cpu/bf16_amx.o: CFLAGS += -mavx512f -mavx512bw -mavx512bf16 -mamx-tile -mamx-bf16
$(BUILD)/src/kernels/cpu/bf16_rows.o: CFLAGS += -mavx512f -mavx512bw -mavx512dq -mavx512bf16

tests: $(TEST_BIN)

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(BUILD)/libolmo.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%.o: tests/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -c -o $@ $<

test:
	bash scripts/test.sh

clean:
	rm -rf $(BUILD)

.PHONY: all tests test clean repro-check
-include $(OBJ:.o=.d) $(BUILD)/src/cli/main.d $(TEST_BIN:%=%.d)
repro-check:
	bash scripts/repro_check.sh
