# The README's two commands: `make run` and `make test`. Everything else is a convenience.
# CI (CI=true in the environment) turns warnings into errors.
SHELL := /bin/bash
CMAKE_FLAGS := $(if $(CI),-DIMPULSE_WERROR=ON,)
SERVER_ARGS ?= --scene demo --port 7777

.PHONY: run test setup build build-asan test-release test-asan docker-smoke bench fuzz clean

setup:
	@bash scripts/setup

build: setup
	cmake --preset release $(CMAKE_FLAGS) >/dev/null
	cmake --build --preset release

build-asan: setup
	cmake --preset asan $(CMAKE_FLAGS) >/dev/null
	cmake --build --preset asan

## Build Release and start the server on UDP 7777 with the built-in demo scene.
run: build
	build/bin/impulse-server $(SERVER_ARGS)

test-release: build
	ctest --preset release

test-asan: build-asan
	ctest --preset asan

## Build and run every test, in Release and under ASan + UBSan.
test: test-release test-asan

## Build the Docker image with podman and check it end to end (offline).
docker-smoke: build
	IMPULSE_SETUP_DOCKER=1 bash scripts/setup
	bash docker/smoke-test.sh

## Build Release and run the Bullet-paired benchmark scenes, then print their table (docs/BENCHMARKS.md).
## BENCH_S2_10000=1 adds S2 with 10000 boxes (several minutes); BENCH_ROUNDS=3 takes medians of 3 runs.
BENCH_STEPS ?= 600
BENCH_ROUNDS ?= 1
BENCH_S2_10000 ?= 0
BENCH_OUT ?= build/bench/results.jsonl
BENCH_RUN = build/bin/impulse-bench --steps $(BENCH_STEPS) --rounds $(BENCH_ROUNDS) --json-out $(BENCH_OUT)

bench: setup
	cmake --preset release $(CMAKE_FLAGS) >/dev/null
	cmake --build --preset release --target impulse-bench
	@mkdir -p $(dir $(BENCH_OUT)) && rm -f $(BENCH_OUT)
	$(BENCH_RUN) --scene S1 --sleep off
	$(BENCH_RUN) --scene S1 --sleep on
	$(BENCH_RUN) --scene S2 --n 1000
	$(BENCH_RUN) --scene S2 --n 4000
	$(if $(filter 1,$(BENCH_S2_10000)),$(BENCH_RUN) --scene S2 --n 10000)
	$(BENCH_RUN) --scene S3 --n 10000
	@echo
	@build/bin/impulse-bench --summary $(BENCH_OUT)

## Build the libFuzzer targets (clang++, ASan + UBSan), seed them with real datagrams and run each
## for FUZZ_SECONDS; prints executions per target, fails on any crash (scripts/fuzz).
FUZZ_SECONDS ?= 60

fuzz: setup
	bash scripts/fuzz $(FUZZ_SECONDS)

clean:
	rm -rf build
