# lms — the commands a person types. CMake does the building, into build/.
#
#   make demo      install what is missing, build, run the demo (lms-info for now)
#   make test      install what is missing, build, run the tests (sim backend),
#                  then again under AddressSanitizer + UBSan (build/asan)
#   make test-gpu  the same suites on the cuda backend (label gpu); each skips,
#                  with the reason, when there is no CUDA device
#   make clean     remove build/
JOBS ?= $(shell nproc)
BUILD := build
ASAN := build/asan
CTEST := ctest --output-on-failure --timeout 900 -j$(JOBS)

.PHONY: all deps build demo test test-sim test-asan test-gpu clean

all: build

deps:
	@sh tools/install-deps.sh

build: deps
	@mkdir -p $(BUILD)
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >$(BUILD)/configure.log 2>&1 || \
		{ cat $(BUILD)/configure.log; exit 1; }
	@cmake --build $(BUILD) -j$(JOBS)

demo: build
	$(BUILD)/lms-info

test: test-sim test-asan

test-sim: build
	$(CTEST) --test-dir $(BUILD) -LE gpu

test-asan: deps
	@mkdir -p $(ASAN)
	@cmake -S . -B $(ASAN) -DCMAKE_BUILD_TYPE=Debug -DLMS_SANITIZE=address,undefined \
		>$(ASAN)/configure.log 2>&1 || { cat $(ASAN)/configure.log; exit 1; }
	@cmake --build $(ASAN) -j$(JOBS)
	$(CTEST) --test-dir $(ASAN) -LE gpu

test-gpu: build
	$(CTEST) --test-dir $(BUILD) -L gpu

clean:
	rm -rf $(BUILD)
