# olmo.c build. `make` builds $(BUILD)/olmo; `make tests` builds the C test programs;
# BUILD=dir puts objects and binaries elsewhere (default build/).
# `make test` runs the whole suite (see scripts/test.sh, which also installs deps).
CC ?= gcc
BUILD ?= build
CFLAGS ?= -O3 -march=native
CFLAGS += -std=c11 -D_GNU_SOURCE -Wall -Wextra -fopenmp -fno-math-errno -Isrc -I/usr/include/cjson -MMD -MP
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

SRC := $(shell find src -name '*.c' ! -name main.c ! -path 'src/kernels/cuda/*' | sort)
OBJ := $(SRC:%.c=$(BUILD)/%.o)
TEST_SRC := $(wildcard tests/*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

all: $(BUILD)/olmo tests

$(BUILD)/olmo: $(BUILD)/src/main.o $(BUILD)/libolmo.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/libolmo.a: $(OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

tests: $(TEST_BIN)

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(BUILD)/libolmo.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%.o: tests/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -c -o $@ $<

test:
	bash scripts/test.sh

clean:
	rm -rf build

.PHONY: all tests test clean
-include $(OBJ:.o=.d) $(BUILD)/src/main.d $(TEST_BIN:%=%.d)
