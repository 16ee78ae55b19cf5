# remora — build, test, sanitizer build. Plain GNU make; see README.md.

CC      ?= cc
# link-time optimisation where the compiler has it: the unwinder is split by concern into
# files whose small functions are called per frame, and LTO inlines them across files.
# The compiler is asked once, when a recipe first needs CFLAGS (a make with nothing to
# build asks nothing); the probe's object goes to a temporary file, never /dev/null,
# which a tool run as root could replace.
LTO      = $(eval LTO := $(shell t=$$(mktemp) && $(CC) -flto=auto -x c -c /dev/null -o "$$t" 2>/dev/null && echo -flto=auto; rm -f "$$t"))$(LTO)
CFLAGS  ?= -O2 -g $(LTO)
# -Werror only where asked (CI: make WERROR=1): a user's newer compiler may warn anew
WARN    := -std=c11 -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
           -Wno-missing-field-initializers $(if $(WERROR),-Werror)
# the version: one source, the VERSION file (debian/changelog names the same)
VERSION := $(strip $(file <VERSION))
CPPFLAGS += -Iinclude -D_GNU_SOURCE -DREMORA_VERSION='"$(VERSION)"'
LDLIBS  += -lz -lm -ldw -lelf -lbpf

# (src/kern/*.bpf.c is BPF code, built by its own rule below; TEST_ONLY, the test builds'
# alone: TESTING_SRC below)
TEST_ONLY := src/proc/snapshot.c
SRC := $(filter-out %.bpf.c $(TEST_ONLY),$(wildcard src/util/*.c src/proc/*.c src/py/*.c \
         src/unwind/*.c src/lib/*.c src/sample/*.c src/formats/*.c src/kern/*.c))
CLI := $(wildcard src/cli/*.c)

BUILD ?= build
# the flamegraph page, embedded as a C array (its rules: below)
FG_HTML_O := $(BUILD)/gen/flamegraph_html.o
OBJ     := $(SRC:%.c=$(BUILD)/%.o) $(FG_HTML_O)
CLI_OBJ := $(CLI:%.c=$(BUILD)/%.o)

# Test-only code (snapshots: their recorder and reader; the entry points only tests and
# fuzzers call) sits under #ifdef REMORA_TESTING and in TEST_ONLY: these files are
# compiled again with it into $(BUILD)/test/ for the test and fuzz binaries (TEST_OBJ), so
# that remora and libremora hold none of it and their reads pay nothing for it. proc/ is
# there whole: its handle's struct differs between the two builds. The test programs'
# own sources are compiled there too (TEST_MAIN_OBJ).
TESTING_SRC := $(wildcard src/proc/*.c) src/unwind/native.c src/unwind/tasks_lists.c
TEST_OBJ    := $(filter-out $(TESTING_SRC:%.c=$(BUILD)/%.o),$(OBJ)) $(TESTING_SRC:%.c=$(BUILD)/test/%.o)
# the unit tests: every tests/unit/*.c (main.c runs each part's file; unit.h)
UNIT_OBJ    := $(patsubst %.c,$(BUILD)/test/%.o,$(wildcard tests/unit/*.c))
TEST_MAIN_OBJ := $(UNIT_OBJ) $(addprefix $(BUILD)/test/tests/,fuzz/tool.o fuzz/targets.o kern/kern_tool.o \
                   browser/mkprofile.o bench/unwind_ab.o)

all: remora

# every program but the libFuzzer ones (their rule: below); each one's objects are its
# prerequisites, listed where it is described
PROGRAMS := remora $(BUILD)/remora $(BUILD)/unit_tests $(BUILD)/fuzz_tool $(BUILD)/kern_tool \
            $(BUILD)/mkprofile $(BUILD)/unwind_ab
$(PROGRAMS):
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# remora, or any build directory's own (make BUILD=build-x build-x/remora)
remora $(BUILD)/remora: $(OBJ) $(CLI_OBJ)

# each object depends on the headers it includes (-MMD writes them into a .d beside it)
$(BUILD)/%.o: %.c VERSION
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/test/%.o: %.c VERSION
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -DREMORA_TESTING -Isrc $(WARN) $(CFLAGS) -MMD -MP -c -o $@ $<

-include $(OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TESTING_SRC:%.c=$(BUILD)/test/%.d) $(TEST_MAIN_OBJ:.o=.d)

# unit tests: pure parts, no process needed
$(BUILD)/unit_tests: $(UNIT_OBJ) $(TEST_OBJ)

unit: $(BUILD)/unit_tests
	$(BUILD)/unit_tests

# what `make test` builds after its set-up (a recipe of its own: an up-to-date build says
# nothing)
test-build: remora $(BUILD)/unit_tests $(BUILD)/fuzz_tool $(BUILD)/mkprofile
	@:

# every test; the last line counts them all (fidelity/mix too: REMORA_FIDELITY=1). The
# set-up first, then the build in a make of its own: nothing is compiled before the
# packages it needs are there, also under -j.
test: test-setup
	@$(MAKE) --no-print-directory test-build
	@REMORA_FIDELITY=1 python3 tests/run_all.py --remora ./remora --unit $(BUILD)/unit_tests --fuzz-tool $(BUILD)/fuzz_tool \
	    --mkprofile $(BUILD)/mkprofile

# the same tests against an AddressSanitizer + UndefinedBehaviorSanitizer build, on three
# interpreters: each kind of frame (3.9's objects, 3.11's cframe, 3.15's shims and entry
# frames read through _Py_DebugOffsets) and of binary (shared libpython, static, PIE); make
# test runs all twelve. ASAN_INTERPRETERS= (empty) runs all twelve here too. The measurements
# of timing (fidelity/mix, real/*, idle/*, server/*) run in make test only, which keeps
# .ci/run within the hour.
ASAN_FLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
ASAN_INTERPRETERS ?= pyenv-3.9.18,debian-3.11-static,sid-3.15-pie
asan:
	$(MAKE) BUILD=build-asan CFLAGS="$(ASAN_FLAGS)" LDFLAGS="$(ASAN_FLAGS)" build-asan/remora build-asan/unit_tests build-asan/fuzz_tool \
	    build-asan/mkprofile
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 REMORA_INTERPRETERS=$(ASAN_INTERPRETERS) \
	    python3 tests/run_all.py --remora build-asan/remora --unit build-asan/unit_tests \
	    --fuzz-tool build-asan/fuzz_tool --mkprofile build-asan/mkprofile

# regenerate the 3.9–3.12 layouts from installed headers
offsets:
	tools/gen_offsets.sh

clean:
	rm -rf build build-asan build-lib remora

.PHONY: all unit test test-build asan offsets clean

# ---- the in-kernel engine (src/kern/kern.h) ---------------------------------------------
# The BPF object is compiled by clang for the BPF target with flags of its own (never the
# sanitizers'), turned by bpftool into a skeleton header that embeds it, which kern.c
# includes: the skeleton is made before kern.o compiles.
BPF_CLANG  ?= clang
# (asked of the machine when the BPF object is built, not each time make reads this file)
BPF_ARCH    = $(shell uname -m | sed 's/x86_64/x86/; s/aarch64/arm64/')
BPF_MULTI   = $(shell $(BPF_CLANG) -print-multiarch 2>/dev/null)
BPF_CFLAGS  = -O2 -g -target bpf -D__TARGET_ARCH_$(BPF_ARCH) -I/usr/include/$(BPF_MULTI) \
              -Iinclude -Isrc/kern -Wall -Wextra -Wno-unused-parameter -Werror=implicit-function-declaration \
              $(if $(WERROR),-Werror)
BPFTOOL    ?= bpftool

$(BUILD)/kern/remora.bpf.o: src/kern/remora.bpf.c
	@mkdir -p $(dir $@)
	$(BPF_CLANG) $(BPF_CFLAGS) -MMD -MP -c -o $@ $<

-include $(BUILD)/kern/remora.bpf.d

$(BUILD)/gen/remora_bpf.skel.h: $(BUILD)/kern/remora.bpf.o
	@mkdir -p $(dir $@)
	$(BPFTOOL) gen skeleton $< name remora_bpf > $@.tmp && mv $@.tmp $@

$(BUILD)/src/kern/kern.o: $(BUILD)/gen/remora_bpf.skel.h
$(BUILD)/src/kern/kern.o: CPPFLAGS += -I$(BUILD)/gen

# the engine's test tool: tests/kern/kern_tool.c (needs root, or CAP_BPF + CAP_PERFMON)
$(BUILD)/kern_tool: $(BUILD)/test/tests/kern/kern_tool.o $(TEST_OBJ)

# ---- libremora: include/remora/remora.h, docs/api.md --------------------------------------
# The library is the reading half of the tree (util, proc, py, unwind, the kernel engine's
# loader, lib/api.c), compiled again -fPIC without LTO in a build directory of its own
# (LIB_BUILD; the command's objects are untouched): libremora.a (one relocatable object
# whose only global symbols are the API's, src/lib/libremora.sym) and libremora.so.0.N
# (soname libremora.so.0; the version script exports the same names).
LIB_BUILD  ?= build-lib
LIB_CFLAGS ?= -O2 -g
LIB_MINOR  := 1
LIB_SONAME := libremora.so.0
LIB_SO     := $(LIB_SONAME).$(LIB_MINOR)
LIB_SRC    := $(filter-out %.bpf.c $(TEST_ONLY),$(wildcard src/util/*.c src/proc/*.c src/py/*.c src/unwind/*.c \
                src/kern/*.c src/lib/*.c src/sample/sampler.c src/sample/take.c src/sample/subs.c \
                src/sample/async.c src/sample/stacks.c))
LIB_OBJ    := $(LIB_SRC:%.c=$(BUILD)/%.o)

lib:
	$(MAKE) BUILD=$(LIB_BUILD) CFLAGS="$(LIB_CFLAGS) -fPIC" LDFLAGS="$(LDFLAGS)" \
	    $(LIB_BUILD)/libremora.a $(LIB_BUILD)/$(LIB_SO)

$(BUILD)/libremora.a: $(LIB_OBJ) src/lib/libremora.sym
	$(CC) $(CFLAGS) -r -nostdlib -o $(BUILD)/libremora.o $(LIB_OBJ)
	objcopy --keep-global-symbols=src/lib/libremora.sym $(BUILD)/libremora.o
	rm -f $@
	ar rcs $@ $(BUILD)/libremora.o

$(BUILD)/$(LIB_SO): $(LIB_OBJ) src/lib/libremora.sym
	{ echo '{ global:'; sed 's/$$/;/' src/lib/libremora.sym; echo 'local: *; };'; } > $(BUILD)/libremora.map
	$(CC) $(CFLAGS) $(LDFLAGS) -shared -Wl,-soname,$(LIB_SONAME) -Wl,--version-script=$(BUILD)/libremora.map \
	    -Wl,--no-undefined -o $@ $(LIB_OBJ) $(LDLIBS)
	ln -sf $(LIB_SO) $(BUILD)/$(LIB_SONAME)
	ln -sf $(LIB_SONAME) $(BUILD)/libremora.so

.PHONY: lib

# ---- the Python module remora (docs/api.md) -----------------------------------------------
# remora._remora over libremora.a (linked in: the module needs only libdw, libelf, libbpf
# and zlib), compiled against PYTHON's headers with Py_LIMITED_API 3.9: one
# _remora.abi3.so for every CPython 3.9+. $(LIB_BUILD)/python is then a directory to put
# on PYTHONPATH. (`pip install . --no-build-isolation` builds the same through setup.py.)
PYTHON ?= /usr/bin/python3
PY_INCLUDE ?= $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
PY_DIR := $(LIB_BUILD)/python/remora

python: lib
	@mkdir -p $(PY_DIR)
	$(CC) $(CPPFLAGS) $(WARN) $(LIB_CFLAGS) -fPIC -shared -I$(PY_INCLUDE) $(LDFLAGS) \
	    -Wl,--exclude-libs,ALL -o $(PY_DIR)/_remora.abi3.so python/remora/_remora.c \
	    $(LIB_BUILD)/libremora.a $(LDLIBS)
	cp python/remora/__init__.py $(PY_DIR)/__init__.py

.PHONY: python

# ---- install: docs/install.md -------------------------------------------------------------
# make install [PREFIX=/usr/local] [DESTDIR=/staging]: the binary, remora(1), the bash and
# zsh completions, and libremora (its header, the static and shared library,
# the soname's and the linker's links, the pkg-config file; INSTALL_LIB=no leaves it out,
# as the Debian package does for now); make uninstall removes exactly those files
# (directories are left: they may hold others' files, as GNU's uninstall does; but
# include/remora, libremora's own, once empty). BIN: which
# build's binary (the tests install the one they run).
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
MANDIR  ?= $(PREFIX)/share/man
LIBDIR  ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR  ?= $(PREFIX)/share/zsh/site-functions
BIN     ?= remora
INSTALL ?= install
INSTALL_LIB ?= yes
# a directory under PREFIX named from ${prefix} in the .pc (pkg-config --define-prefix can
# then move the whole tree)
PC_DIR = $(patsubst $(PREFIX)/%,$${prefix}/%,$(1))
INSTALLED := $(DESTDIR)$(BINDIR)/remora $(DESTDIR)$(MANDIR)/man1/remora.1 \
             $(DESTDIR)$(BASHCOMPDIR)/remora $(DESTDIR)$(ZSHCOMPDIR)/_remora
LIB_INSTALLED := $(DESTDIR)$(INCLUDEDIR)/remora/remora.h $(DESTDIR)$(LIBDIR)/libremora.a \
             $(DESTDIR)$(LIBDIR)/$(LIB_SO) $(DESTDIR)$(LIBDIR)/$(LIB_SONAME) \
             $(DESTDIR)$(LIBDIR)/libremora.so $(DESTDIR)$(PKGCONFIGDIR)/libremora.pc

install: $(BIN) $(if $(filter yes,$(INSTALL_LIB)),lib)
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(BASHCOMPDIR) \
	    $(DESTDIR)$(ZSHCOMPDIR)
	$(INSTALL) -m 755 $(BIN) $(DESTDIR)$(BINDIR)/remora
	$(INSTALL) -m 644 docs/remora.1 $(DESTDIR)$(MANDIR)/man1/remora.1
	$(INSTALL) -m 644 completions/remora.bash $(DESTDIR)$(BASHCOMPDIR)/remora
	$(INSTALL) -m 644 completions/_remora $(DESTDIR)$(ZSHCOMPDIR)/_remora
ifeq ($(INSTALL_LIB),yes)
	$(INSTALL) -d $(DESTDIR)$(INCLUDEDIR)/remora $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PKGCONFIGDIR)
	$(INSTALL) -m 644 include/remora/remora.h $(DESTDIR)$(INCLUDEDIR)/remora/remora.h
	$(INSTALL) -m 644 $(LIB_BUILD)/libremora.a $(DESTDIR)$(LIBDIR)/libremora.a
	$(INSTALL) -m 755 $(LIB_BUILD)/$(LIB_SO) $(DESTDIR)$(LIBDIR)/$(LIB_SO)
	ln -sf $(LIB_SO) $(DESTDIR)$(LIBDIR)/$(LIB_SONAME)
	ln -sf $(LIB_SONAME) $(DESTDIR)$(LIBDIR)/libremora.so
	sed -e 's|@PREFIX@|$(PREFIX)|; s|@LIBDIR@|$(call PC_DIR,$(LIBDIR))|; s|@INCLUDEDIR@|$(call PC_DIR,$(INCLUDEDIR))|' \
	    -e 's|@VERSION@|$(VERSION)|; s|@LIBS_PRIVATE@|$(LDLIBS)|' \
	    src/lib/libremora.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/libremora.pc
	chmod 644 $(DESTDIR)$(PKGCONFIGDIR)/libremora.pc
endif

uninstall:
	rm -f $(INSTALLED) $(if $(filter yes,$(INSTALL_LIB)),$(LIB_INSTALLED))
	$(if $(filter yes,$(INSTALL_LIB)),rmdir $(DESTDIR)$(INCLUDEDIR)/remora 2>/dev/null || true)

.PHONY: install uninstall

# ---- set-up, demo ------------------------------------------------------------------------
# `make demo` and `make test` install what they lack first, before anything is compiled:
# tools/setup.sh --demo or --test (the packages: tools/packages.txt). As root with apt-get
# it installs what is missing (nothing when all is there); otherwise it says in one line
# the command to run, and make stops. A plain `make` installs nothing; SETUP=no skips the
# set-up; `make demo-setup` / `make test-setup` run it alone.
demo-setup test-setup:
ifneq ($(SETUP),no)
	@tools/setup.sh --$(@:%-setup=%)
else
	@:
endif

# build (in a make of its own, after the set-up, also under -j), then dump the bundled
# demo program's threads
demo: demo-setup
	@$(MAKE) --no-print-directory demo-build
	tools/demo.sh

demo-build: remora
	@:

.PHONY: demo demo-build demo-setup test-setup

# ---- flamegraph template and browser tests -------------------------------------------
# src/formats/flamegraph.html is embedded into the binary as a C array: tools/embed.c writes
# $(BUILD)/gen/flamegraph_html.c, whose object, FG_HTML_O, is one of $(OBJ).

$(BUILD)/tools/embed: tools/embed.c
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) $(LDFLAGS) -o $@ $<

$(BUILD)/gen/flamegraph_html.c: src/formats/flamegraph.html $(BUILD)/tools/embed
	@mkdir -p $(dir $@)
	$(BUILD)/tools/embed $< $@ out_flamegraph_html

$(FG_HTML_O): $(BUILD)/gen/flamegraph_html.c
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) -c -o $@ $<

# the browser tests' profile writer: links only the stack table and the writers (the page, the
# table, the heatmap)
MKPROFILE_OBJ := $(addprefix $(BUILD)/src/,sample/stacks.o sample/functions.o util/strtab.o util/grow.o formats/json.o formats/flamegraph.o formats/table.o formats/text.o formats/heatmap.o formats/heatmap_count.o formats/counts.o util/lines.o) $(FG_HTML_O)
$(BUILD)/mkprofile: $(BUILD)/test/tests/browser/mkprofile.o $(MKPROFILE_OBJ)

# headless Chromium (Debian's chromium) driven by playwright-core (tests/browser/);
# prints SKIP lines when either is missing. browser-deps installs both.
browser-test: $(BUILD)/mkprofile
	node tests/browser/run.mjs --mkprofile $(BUILD)/mkprofile

browser-deps:
	test -x /usr/bin/chromium || { apt-get update && apt-get install -y chromium; }
	cd tests/browser && npm ci

.PHONY: browser-test browser-deps

# ---- fuzzing: tests/fuzz/README.md --------------------------------------------------------
# fuzz_tool replays the committed corpora and crash inputs (make test, make asan) and
# records snapshots; `make fuzz` builds one libFuzzer binary per target with clang
# (ASan + UBSan) and runs each for FUZZ_SECONDS.
FUZZ_TARGETS := maps elf lnotab lt310 locations core unwind native locals collapsed raw
FUZZ_SECONDS ?= 60
FUZZ_CC      ?= clang
FUZZ_FLAGS   := -O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all \
                -fno-omit-frame-pointer

$(BUILD)/fuzz_tool: $(BUILD)/test/tests/fuzz/tool.o $(BUILD)/test/tests/fuzz/targets.o $(TEST_OBJ)

# a target's entry point: tests/fuzz/entry.c for fuzz_$*
$(BUILD)/test/tests/fuzz/entry-%.o: tests/fuzz/entry.c VERSION
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -DREMORA_TESTING -Isrc -DFUZZ_TARGET=fuzz_$* $(WARN) $(CFLAGS) -MMD -MP -c -o $@ $<

-include $(wildcard $(BUILD)/test/tests/fuzz/entry-*.d)

$(BUILD)/fuzz-%: $(BUILD)/test/tests/fuzz/entry-%.o $(BUILD)/test/tests/fuzz/targets.o $(TEST_OBJ)
	$(CC) $(CFLAGS) $(LDFLAGS) -fsanitize=fuzzer -o $@ $^ $(LDLIBS)

fuzz-build:
	$(MAKE) BUILD=build-fuzz CC=$(FUZZ_CC) CFLAGS="$(FUZZ_FLAGS)" $(FUZZ_TARGETS:%=build-fuzz/fuzz-%)

fuzz: fuzz-build
	python3 tests/fuzz/run.py --bin build-fuzz --seconds $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# regenerate the seed corpora from the interpreters on this machine
fuzz-seeds: $(BUILD)/fuzz_tool
	python3 tests/fuzz/gen_seeds.py --tool $(BUILD)/fuzz_tool

.PHONY: fuzz fuzz-build fuzz-seeds

# ---- benchmarks: measure, never assert (tests/bench/bench.py) --------------------------
$(BUILD)/vmread: tests/bench/vmread.c
	@mkdir -p $(BUILD)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) -o $@ $<

# --native's unwinder against libunwind-ptrace and libdw's own ptrace attach (docs/native.md;
# needs libunwind-dev, for this measurement only): $(BUILD)/unwind_ab PID [ROUNDS]
$(BUILD)/unwind_ab: $(BUILD)/test/tests/bench/unwind_ab.o $(TEST_OBJ)
$(BUILD)/unwind_ab: LDLIBS := -lunwind-ptrace -lunwind-generic -lunwind $(LDLIBS)
$(BUILD)/test/tests/bench/unwind_ab.o: CPPFLAGS += -I/usr/include/x86_64-linux-gnu

bench: remora $(BUILD)/vmread
	python3 tests/bench/bench.py --remora ./remora --vmread $(BUILD)/vmread

# the real programs' bounds (real/*) without most of one window's sampling error: each
# real/* test's recordings made REAL_CYCLES times in turn, REAL_SECONDS s each, pooled
# (about 20 min on two cores; docs/measured.md)
REAL_CYCLES ?= 4
REAL_SECONDS ?= 6
bench-real: remora
	REMORA_REAL_CYCLES=$(REAL_CYCLES) REMORA_REAL_SECONDS=$(REAL_SECONDS) \
	    python3 tests/functional/run.py --remora ./remora --only real/

# instructions per sample of another build against this one (callgrind; needs valgrind):
#   make bench-ab BASELINE=/path/to/older/remora
bench-ab: remora
	tests/bench/ab.sh $(BASELINE) ./remora
.PHONY: bench bench-ab bench-real
