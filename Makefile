# lms — the commands a person types. CMake does the building, into build/.
#
#   make demo      install what is missing, build, and train a model 4x the
#                  simulated device (bench/train) over a PCIe-like link, with a
#                  timeline (build/demo/timeline.json), its report
#                  (build/demo/report.html) and the report's charts as one SVG
#                  (build/demo/chart.svg)
#   make demo-svg  make demo, then copy its chart.svg to docs/demo.svg, the
#                  picture the README shows (commit it with how it was made)
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
#
# Output: each step of make demo and make test says what it runs before it
# runs, numbered ([3/5]) when run as part of them; configuring goes to a log
# (BUILD_DIR/configure.log, shown when it fails); a build shows each target as
# it is finished and every warning and error in full, its whole output kept in
# BUILD_DIR/build.log (tools/quiet-build.sh); make's "Entering directory"
# lines are off. ctest prints a line per test as it ends.
MAKEFLAGS += --no-print-directory
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
comma := ,
# The tarball's path, fetched on first use (cheap when it is already there).
JEMALLOC = $$(sh tools/fetch-jemalloc.sh $(BUILD)/deps)
ifneq ($(LMS_JEMALLOC_TARBALL),)
JEMALLOC = $(abspath $(LMS_JEMALLOC_TARBALL))
endif
# $(call step,N,TEXT): a step's heading; "[N/STEPS] TEXT" where the target
# asked for sets STEPS (demo: 3, test: 5), else TEXT (no commas in TEXT).
step = @printf '\n%s%s\n' "$(if $(STEPS),[$(1)/$(STEPS)] )" "$(2)"
# $(call configure,DIR,CMAKE OPTIONS): cmake's configure output to DIR/configure.log
configure = @mkdir -p $(1) && cmake -S . -B $(1) $(2) -DLMS_JEMALLOC_TARBALL="$(JEMALLOC)" \
	>$(1)/configure.log 2>&1 || { cat $(1)/configure.log; echo "configuring $(1) failed" \
	"(its output above and in $(1)/configure.log)" >&2; exit 1; }

.PHONY: all deps jemalloc build demo test test-sim test-asan test-fuzz test-gpu stress tsan-build \
	test-tsan test-tsan-stream demo-svg clean

all: build

deps:
	@sh tools/install-deps.sh

# Fetched here, once, so that build/ and build/asan never fetch it each.
jemalloc: deps
	@j="$(JEMALLOC)" && test -f "$$j" || { echo "no jemalloc tarball: '$$j'" >&2; exit 1; }

build: jemalloc
	$(call step,1,building lms in $(BUILD)/ (RelWithDebInfo; $(JOBS) jobs))
	$(call configure,$(BUILD),-DCMAKE_BUILD_TYPE=RelWithDebInfo)
	@sh tools/quiet-build.sh $(BUILD) -j$(JOBS)

DEMO := $(BUILD)/demo

# LMS_BACKEND=cuda make demo runs it on a GPU (the link is then the card's).
DEMO_RUN = LMS_BACKEND=$${LMS_BACKEND:-sim} LMS_TRACE=$(DEMO)/timeline.json \
	$(BUILD)/bench/train --oversub 4 --link-ratio 60
demo: STEPS := 3
demo: build
	@mkdir -p $(DEMO)
	$(call step,2,training bench/train's model at 4x the device's memory: $(DEMO_RUN))
	@$(BUILD)/lms-info >$(DEMO)/lms-info.txt; rc=$$?; cat $(DEMO)/lms-info.txt; exit $$rc
	@$(DEMO_RUN) >$(DEMO)/train.jsonl
	@grep '"oversub"' $(DEMO)/train.jsonl
	$(call step,3,the timeline's report and chart: lms-report)
	@$(BUILD)/lms-report $(DEMO)/timeline.json -o $(DEMO)/report.html >/dev/null
	@cpu=$$(sed -n 's/^host CPU  *//p' $(DEMO)/lms-info.txt); \
	caption="made by make demo on $$(date -u +%Y-%m-%d): bench/train, a model 4x the device limit"; \
	caption="$$caption; host: $$(nproc) CPUs, $${cpu:-unknown}"; \
	$(BUILD)/lms-report $(DEMO)/timeline.json --svg -o $(DEMO)/chart.svg --caption "$$caption" \
		>/dev/null
	@echo
	@echo "timeline of the 4x run: $(abspath $(DEMO))/timeline.json (open it in https://ui.perfetto.dev)"
	@echo "its report:             $(abspath $(DEMO))/report.html"
	@echo "the report's charts:    $(abspath $(DEMO))/chart.svg"
	@echo "every step as JSON:     $(abspath $(DEMO))/train.jsonl"

# The README's picture is make demo's own chart, copied as it was written.
demo-svg: demo
	@cp $(DEMO)/chart.svg docs/demo.svg
	@echo "docs/demo.svg: a copy of that chart (its caption says how it was made); commit it"

test: STEPS := 5
test: test-sim test-asan test-tsan-stream test-fuzz
	@echo
	@echo "make test: all 5 steps passed"

test-sim: build
	$(call step,2,the tests on the sim backend: $(CTEST) --test-dir $(BUILD) -LE gpu)
	@$(CTEST) --test-dir $(BUILD) -LE gpu

test-asan: jemalloc
	$(call step,3,the tests under AddressSanitizer + UBSan in $(ASAN)/: building)
	$(call configure,$(ASAN),-DCMAKE_BUILD_TYPE=Debug -DLMS_SANITIZE=address$(comma)undefined)
	@sh tools/quiet-build.sh $(ASAN) -j$(JOBS)
	@echo "running them: $(CTEST) --test-dir $(ASAN) -LE gpu"
	@$(CTEST) --test-dir $(ASAN) -LE gpu

test-fuzz: jemalloc
	$(call step,5,the fuzz targets under libFuzzer in $(BUILD)/fuzz/: build; then fuzz)
	@JOBS=$(JOBS) sh tests/fuzz/run.sh $(BUILD)/fuzz "$(JEMALLOC)"

test-gpu: build
	$(CTEST) --test-dir $(BUILD) -L gpu

stress: build
	LMS_BACKEND=sim LMS_POLICY=schedule $(BUILD)/tests/stress --ops $(STRESS_OPS)
	LMS_BACKEND=sim LMS_POLICY=lru $(BUILD)/tests/stress --ops $(STRESS_OPS)

# Only the stress program: Criterion cannot start under ThreadSanitizer. lms's
# private jemalloc is not instrumented, which TSan tolerates.
define tsan_build
	$(call configure,$(TSAN),-DCMAKE_BUILD_TYPE=RelWithDebInfo -DLMS_SANITIZE=thread)
	@sh tools/quiet-build.sh $(TSAN) -j$(JOBS) --target stress
endef
tsan-build: jemalloc
	$(tsan_build)

test-tsan: tsan-build
	$(TSAN_RUN) --ops $(TSAN_STRESS_OPS)
	$(TSAN_RUN) --ops $(TSAN_STRESS_OPS) --threads 2 --loop 97
	$(TSAN_RUN) --ops $(TSAN_STRESS_OPS) --default-stream 1

# make test's share: four threads on the one default stream, as a framework
# runs them (issue 24), data checked, shorter.
test-tsan-stream: jemalloc
	$(call step,4,the default-stream stress under ThreadSanitizer in $(TSAN)/: building)
	$(tsan_build)
	@echo 'running it: $(TSAN_RUN) --ops $(TSAN_TEST_OPS) --default-stream 1'
	@$(TSAN_RUN) --ops $(TSAN_TEST_OPS) --default-stream 1

# cmake --install: CMakeLists.txt's install rules (its "Installing" part)
PREFIX ?= /usr/local
.PHONY: install
install: build
	cmake --install $(BUILD) --prefix "$(abspath $(PREFIX))"

clean:
	rm -rf $(BUILD)
