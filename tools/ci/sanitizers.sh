#!/usr/bin/env bash
# Sanitizer jobs on the CPU test suite (no GPU needed):
#   build-asan/  AddressSanitizer + UndefinedBehaviorSanitizer: the test binary
#                and the CLI (the [cli] tests run it); every CPU test except
#                [variants] (NVRTC compiling every kernel variant: NVRTC's time,
#                not our code's).
#   build-tsan/  ThreadSanitizer: the test binary only; the [concurrency] tests
#                (cache races between threads and processes, concurrent
#                Engine::prepare) and NVRTC's concurrent-compile test.
# Any sanitizer report fails the job (halt_on_error / -fno-sanitize-recover).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tools/setup/deps.sh
jobs=${JOBS:-$(nproc)}  # parallel compiles; JOBS overrides
export ATTNJIT_CACHE_DIR="$(mktemp -d)"  # a private cache: tests never touch the user's
trap 'rm -rf "$ATTNJIT_CACHE_DIR"' EXIT

configure() {  # folder, sanitizer flags, extra cmake args...
  local dir=$1 flags=$2; shift 2
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS="$flags -fno-omit-frame-pointer" -DCMAKE_C_FLAGS="$flags -fno-omit-frame-pointer" \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g" \
    -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" "$@" >/dev/null
}

start=$SECONDS
configure build-asan "-fsanitize=address,undefined -fno-sanitize-recover=all"
cmake --build build-asan -j"$jobs" --target attnjit_tests attnjit_cli
echo "asan+ubsan build: $((SECONDS - start)) s"
start=$SECONDS
# Leak checking included (NVRTC, opened with dlopen, reported no leaks). The
# environment reaches the CLI processes the [cli] tests start.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1 \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ./build-asan/attnjit_tests "~[variants]" --order rand --rng-seed time
echo "asan+ubsan tests: $((SECONDS - start)) s"

start=$SECONDS
# Only the files of the tests this job runs: a whole test binary under TSan
# would add ~20 minutes of compiling on CI's two cores.
configure build-tsan "-fsanitize=thread" -DATTNJIT_BUILD_CLI=OFF \
  -DATTNJIT_TEST_SOURCES_REGEX="tests/(main|cache/concurrency_test|runtime/engine_concurrency_test|runtime/nvrtc_test)\\.cpp$"
cmake --build build-tsan -j"$jobs" --target attnjit_tests
echo "tsan build: $((SECONDS - start)) s"
start=$SECONDS
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
  ./build-tsan/attnjit_tests "[concurrency],NVRTC compiles concurrently from several threads"
echo "tsan tests: $((SECONDS - start)) s"
