# remora — build, test, sanitizer build. Plain GNU make; see README.md.
CC      ?= cc
CFLAGS  ?= -O2 -g
WARN    := -std=c11 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
           -Wno-missing-field-initializers
CPPFLAGS += -Iinclude -D_GNU_SOURCE
LDLIBS  +=

SRC := $(wildcard src/proc/*.c src/py/*.c src/unwind/*.c src/sample/*.c src/out/*.c)
CLI := $(wildcard src/cli/*.c)
HDR := $(wildcard include/*.h src/*/*.h)

BUILD ?= build
OBJ     := $(SRC:%.c=$(BUILD)/%.o)
CLI_OBJ := $(CLI:%.c=$(BUILD)/%.o)

all: remora

remora: $(OBJ) $(CLI_OBJ)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/%.o: %.c $(HDR)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) -c -o $@ $<

# unit tests: pure parts, no process needed
$(BUILD)/unit_tests: tests/unit/unit.c $(OBJ) $(HDR)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) -Isrc -o $@ tests/unit/unit.c $(OBJ) $(LDLIBS)

unit: $(BUILD)/unit_tests
	$(BUILD)/unit_tests

# every test; the last line counts them all
test: remora $(BUILD)/unit_tests
	@python3 tests/run_all.py --remora ./remora --unit $(BUILD)/unit_tests

# the same tests against an AddressSanitizer + UndefinedBehaviorSanitizer build
ASAN_FLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
asan:
	$(MAKE) BUILD=build-asan CFLAGS="$(ASAN_FLAGS)" LDFLAGS="$(ASAN_FLAGS)" build-asan/remora build-asan/unit_tests
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	    python3 tests/run_all.py --remora build-asan/remora --unit build-asan/unit_tests

build-asan/remora: $(OBJ) $(CLI_OBJ)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# regenerate the 3.9–3.12 layouts from installed headers
offsets:
	tools/gen_offsets.sh

clean:
	rm -rf build build-asan remora

.PHONY: all unit test asan offsets clean

# build, then dump the bundled demo program's threads
demo: remora
	tools/demo.sh
.PHONY: demo
