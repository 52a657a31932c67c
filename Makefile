# The README's two commands: `make run` and `make test`. Everything else is a convenience.
# CI (CI=true in the environment) turns warnings into errors.
SHELL := /bin/bash
CMAKE_FLAGS := $(if $(CI),-DIMPULSE_WERROR=ON,)
SERVER_ARGS ?= --scene demo --port 7777

.PHONY: run test setup build build-asan test-release test-asan docker-smoke clean

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

clean:
	rm -rf build
