# lms — the commands a person types. CMake does the building, into build/.
#
#   make demo      install what is missing, build, and train a model 4x the
#                  simulated device (bench/train) over a PCIe-like link, with a
#                  timeline (build/demo/timeline.json) and its report
#                  (build/demo/report.html)
#   make test      install what is missing, build, run the tests (sim backend),
#                  then again under AddressSanitizer + UBSan (build/asan), and
#                  the threads-on-the-default-stream stress under
#                  ThreadSanitizer (build/tsan)
#   make test-fuzz the fuzz targets (tests/fuzz/) under libFuzzer, a minute each (build/fuzz; skipped without clang)
#   make test-gpu  the same suites on the cuda backend (label gpu); each skips,
#                  with the reason, when there is no CUDA device
#   make stress    the swap stress (tests/swap/stress.c), 10^6 operations at
#                  2x, 4x and 8x oversubscription, under LMS_POLICY=schedule,
#                  then lru; LMS_STRESS_SEED=<seed> replays
#   make test-tsan the stress, smaller, under ThreadSanitizer (build/tsan)
#   make install   build as make build does, then install into PREFIX (default
#                  /usr/local; make install PREFIX=$HOME/.local): liblms.so,
#                  lms.h, the tools, lms.pc and the CMake package lms
#   make clean     remove build/
#
# jemalloc's source (lms builds a private one, see DESIGN.md) is fetched once
# into build/deps and shared by build/ and build/asan; to use a tarball you
# already have: make test LMS_JEMALLOC_TARBALL=/path/to/jemalloc-5.3.0.tar.bz2
JOBS ?= $(shell nproc)
BUILD := build
ASAN := build/asan
TSAN := build/tsan
STRESS_OPS ?= 1000000
TSAN_STRESS_OPS ?= 6000
TSAN_TEST_OPS ?= 3000
TSAN_RUN := LMS_BACKEND=sim TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" $(TSAN)/tests/stress
CTEST := ctest --output-on-failure --timeout 900 -j$(JOBS)
LMS_JEMALLOC_TARBALL ?=
# The tarball's path, fetched on first use (cheap when it is already there).
JEMALLOC = $$(sh tools/fetch-jemalloc.sh $(BUILD)/deps)
ifneq ($(LMS_JEMALLOC_TARBALL),)
JEMALLOC = $(abspath $(LMS_JEMALLOC_TARBALL))
endif

.PHONY: all deps jemalloc build demo test test-sim test-asan test-fuzz test-gpu stress tsan-build \
	test-tsan test-tsan-stream clean

all: build

deps:
	@sh tools/install-deps.sh

# Fetched here, once, so that build/ and build/asan never fetch it each.
jemalloc: deps
	@j="$(JEMALLOC)" && test -f "$$j" || { echo "no jemalloc tarball: '$$j'" >&2; exit 1; }

build: jemalloc
	@mkdir -p $(BUILD)
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DLMS_JEMALLOC_TARBALL="$(JEMALLOC)" >$(BUILD)/configure.log 2>&1 || \
		{ cat $(BUILD)/configure.log; exit 1; }
	@cmake --build $(BUILD) -j$(JOBS)

DEMO := $(BUILD)/demo

# LMS_BACKEND=cuda make demo runs it on a GPU (the link is then the card's).
demo: build
	@mkdir -p $(DEMO)
	$(BUILD)/lms-info
	LMS_BACKEND=$${LMS_BACKEND:-sim} LMS_TRACE=$(DEMO)/timeline.json \
		$(BUILD)/bench/train --oversub 4 --link-ratio 60 >$(DEMO)/train.jsonl
	@grep '"oversub"' $(DEMO)/train.jsonl
	@$(BUILD)/lms-report $(DEMO)/timeline.json -o $(DEMO)/report.html >/dev/null
	@echo
	@echo "timeline of the 4x run: $(abspath $(DEMO))/timeline.json (open it in https://ui.perfetto.dev)"
	@echo "its report:             $(abspath $(DEMO))/report.html"
	@echo "every step as JSON:     $(abspath $(DEMO))/train.jsonl"

test: test-sim test-asan test-tsan-stream test-fuzz

test-sim: build
	$(CTEST) --test-dir $(BUILD) -LE gpu

test-asan: jemalloc
	@mkdir -p $(ASAN)
	@cmake -S . -B $(ASAN) -DCMAKE_BUILD_TYPE=Debug -DLMS_SANITIZE=address,undefined \
		-DLMS_JEMALLOC_TARBALL="$(JEMALLOC)" \
		>$(ASAN)/configure.log 2>&1 || { cat $(ASAN)/configure.log; exit 1; }
	@cmake --build $(ASAN) -j$(JOBS)
	$(CTEST) --test-dir $(ASAN) -LE gpu

test-fuzz: jemalloc
	@JOBS=$(JOBS) sh tests/fuzz/run.sh $(BUILD)/fuzz "$(JEMALLOC)"

test-gpu: build
	$(CTEST) --test-dir $(BUILD) -L gpu

stress: build
	LMS_BACKEND=sim LMS_POLICY=schedule $(BUILD)/tests/stress --ops $(STRESS_OPS)
	LMS_BACKEND=sim LMS_POLICY=lru $(BUILD)/tests/stress --ops $(STRESS_OPS)

# Only the stress program: Criterion cannot start under ThreadSanitizer. lms's
# private jemalloc is not instrumented, which TSan tolerates.
tsan-build: jemalloc
	@mkdir -p $(TSAN)
	@cmake -S . -B $(TSAN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLMS_SANITIZE=thread \
		-DLMS_JEMALLOC_TARBALL="$(JEMALLOC)" \
		>$(TSAN)/configure.log 2>&1 || { cat $(TSAN)/configure.log; exit 1; }
	@cmake --build $(TSAN) -j$(JOBS) --target stress

test-tsan: tsan-build
	$(TSAN_RUN) --ops $(TSAN_STRESS_OPS)
	$(TSAN_RUN) --ops $(TSAN_STRESS_OPS) --threads 2 --loop 97
	$(TSAN_RUN) --ops $(TSAN_STRESS_OPS) --default-stream 1

# make test's share: four threads on the one default stream, as a framework
# runs them (issue 24), data checked, shorter.
test-tsan-stream: tsan-build
	$(TSAN_RUN) --ops $(TSAN_TEST_OPS) --default-stream 1

# cmake --install: CMakeLists.txt's install rules (its "Installing" part)
PREFIX ?= /usr/local
.PHONY: install
install: build
	cmake --install $(BUILD) --prefix "$(abspath $(PREFIX))"

clean:
	rm -rf $(BUILD)
