# olmo.c build. `make` builds build/olmo; `make tests` builds the C test programs;
# `make test` runs the whole suite (see scripts/test.sh, which also installs deps).
CC ?= gcc
CFLAGS ?= -O3 -march=native
CFLAGS += -std=c11 -D_GNU_SOURCE -Wall -Wextra -fopenmp -Isrc -I/usr/include/cjson -MMD -MP
LDLIBS := -lopenblas -lpcre2-8 -lcjson -lyaml -lzstd -lz -lcrypto -lm -lpthread
LDFLAGS += -fopenmp

SRC := $(shell find src -name '*.c' ! -name main.c ! -path 'src/kernels/cuda/*' | sort)
OBJ := $(SRC:%.c=build/%.o)
TEST_SRC := $(wildcard tests/*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=build/tests/%)

all: build/olmo tests

build/olmo: build/src/main.o build/libolmo.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

build/libolmo.a: $(OBJ)
	@rm -f $@
	ar rcs $@ $^

build/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

tests: $(TEST_BIN)

build/tests/%: build/tests/%.o build/libolmo.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

build/tests/%.o: tests/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -c -o $@ $<

test:
	bash scripts/test.sh

clean:
	rm -rf build

.PHONY: all tests test clean
-include $(OBJ:.o=.d) build/src/main.d $(TEST_BIN:%=%.d)
