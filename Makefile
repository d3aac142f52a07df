# SPDX-License-Identifier: Apache-2.0
# Convenience wrapper around CMake. `make help` lists the targets.
BUILD ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
FUZZ_BUILD ?= build-fuzz
LINT_BUILD ?= build-lint
FUZZ_SECONDS ?= 60
FUZZ_JOBS ?= 2
SOAK_SECONDS ?= 600
JOBS ?= 2
CMAKE_FLAGS ?=
NP ?= 4
GPU_ARGS ?=

.PHONY: help deps deps-build build build-test docs install lint run test test-asan test-gpu \
	test-loaded \
	test-unit test-python test-tsan fuzz soak bench bench-auto bench-compare bench-net \
	bench-net-sharded bench-net-rails bench-elastic bench-fsdp bench-torch bench-plots bench-scale clean

help:
	@echo "gradsync make targets:"
	@echo "  make run           install deps, build, run a $(NP)-rank all-reduce demo and a short gs-bench"
	@echo "  make test          install deps, build with -Werror, run every test (ctest); with CUDA and"
	@echo "                     NCCL when found (GS_WITH_CUDA=AUTO): GPU tests are skipped without a GPU"
	@echo "                     (CTEST_JOBS=2: two tests at a time, as .ci/run does)"
	@echo "  make test-loaded   make test with two CPU-burning processes beside it (scripts/test-loaded.sh),"
	@echo "                     then each test's time over its deadline, the least margin first"
	@echo "  make test-asan     build without CUDA, with AddressSanitizer+UBSan, in $(ASAN_BUILD)/ and run"
	@echo "                     the tests but the 'large', 'exhaustive', lab ('net') and 'static' ones (make test runs those)"
	@echo "  make test-tsan     build without CUDA, with ThreadSanitizer, in $(TSAN_BUILD)/ and run the unit and"
	@echo "                     integration tests that run threads, then the MPI ones (tests/tsan.supp)"
	@echo "  make fuzz          build the libFuzzer targets with clang in $(FUZZ_BUILD)/ and fuzz each for"
	@echo "                     FUZZ_SECONDS=$(FUZZ_SECONDS) s, FUZZ_JOBS=$(FUZZ_JOBS) at a time (FUZZ_MERGE=1: merge new"
	@echo "                     inputs into tests/fuzz/corpora/)"
	@echo "  make soak          mixed collectives, p2p, dtypes and codecs on 4 ranks for SOAK_SECONDS=$(SOAK_SECONDS) s,"
	@echo "                     every result checked; fails on any error or peak-RSS growth over 10% + 4 MiB"
	@echo "  make test-gpu      on a machine with a GPU: tests/gpu/run.sh, a fresh CUDA build, the GPU tests"
	@echo "                     and one all-reduce per path (NCCL, staged, compressed) under 6 min, plus"
	@echo "                     kernel GB/s; GPU_ARGS=--quick: under 4 min; GPU_ARGS=--plan: the steps"
	@echo "  make test-unit     run only the unit tests"
	@echo "  make lint          clang-format check, clang-tidy and cppcheck (scripts/lint.sh; configured in"
	@echo "                     $(LINT_BUILD)/; LINT_STEPS='tidy cppcheck' runs only those;"
	@echo "                     'scripts/lint.sh --fix-format' reformats)"
	@echo "  make test-python   run only the Python package's tests (pytest, 1, 2 and 4 ranks; ctest -L python)"
	@echo "  make bench         gs-bench all-reduce sweep, 4 KiB to 256 MiB, $(NP) ranks"
	@echo "  make bench-auto    auto beside every forced all-reduce algorithm, interleaved, $(NP) ranks:"
	@echo "                     how far the cost model's choice is from the fastest at each size"
	@echo "  make bench-compare gradsync beside Open MPI and Gloo in one run (bench/compare/compare.sh)"
	@echo "  make bench-torch   torch 2.x: DDP and FSDP2 step and all_reduce time, gloo beside the"
	@echo "                     gradsync backend, and gs-bench's, on the same $(NP) CPU ranks (~4 min)"
	@echo "  make bench-scale   start-up of 8 to 128 ranks on this host, with shared memory and TCP only,"
	@echo "                     GS_CONNECT=eager and lazy: init time, descriptors, threads and RSS a rank,"
	@echo "                     peak shared memory (bench/scale/bench_scale.sh, ~2 min; SCALE_ARGS='--ranks"
	@echo "                     8,16 --rounds 1'); then the scale simulation fitted on it: validation and"
	@echo "                     predictions at 1,024 and 4,096 ranks (bench/scale/simulate.py; docs/scale.md)"
	@echo "  make bench-plots   take docs/bench.md's recorded runs again (~15 min) and redraw"
	@echo "                     docs/bench/*.png (scripts/bench-plots.sh; without --run it only redraws)"
	@echo "  make bench-net     all-reduce across 4 lab hosts shaped to 1 Gbit/s: busbw and link efficiency (root)"
	@echo "  make bench-elastic time to shrink (a rank killed) and to grow (3 ranks + 1 new), 4 ranks,"
	@echo "                     median of 10, loopback and 4 lab hosts (root; docs/reliability.md, ~2 min)"
	@echo "  make bench-net-rails  multi-rail TCP: 4 lab hosts with two rails (800 + 200 Mbit/s), 256 MiB"
	@echo "                     all-reduce, rate-balanced against equal striping, a tc change 800 -> 100"
	@echo "                     mid-run; a TSV time series and a plot of shares and busbw (~6 min, root;"
	@echo "                     RAILS_ARGS='--rounds 1 -i 3' for fewer runs)"
	@echo "  make bench-net-sharded  compressed reduce-scatter and all-gather (int8, int4, fp8_e4m3 where"
	@echo "                     built) against uncompressed, 4 lab hosts at 1 Gbit/s, 5 rounds (root)"
	@echo "  make bench-fsdp    FSDP2 step time, compressed all-gather/reduce-scatter against uncompressed"
	@echo "                     and gloo, 4 lab hosts at 100 Mbit/s and 1 Gbit/s, 3 rounds (root, torch 2.x)"
	@echo "  make build         build the library and tools (needs only the build packages; no root"
	@echo "                     once they are there)"
	@echo "  make install       build, then cmake --install (PREFIX=/path to choose; docs/install.md)"
	@echo "  make docs          the API reference with Doxygen, warnings as errors ($(BUILD)/docs/api/html)"
	@echo "  make deps          install every Debian package: build, test and bench, and the test set's"
	@echo "                     torch 2.15 virtual environment from PyPI (scripts/install-deps.sh;"
	@echo "                     'make deps-build' only the build packages)"
	@echo "  make clean         remove $(BUILD)/, $(ASAN_BUILD)/, $(TSAN_BUILD)/, $(FUZZ_BUILD)/ and $(LINT_BUILD)/"

deps:
	bash scripts/install-deps.sh all

deps-build:
	bash scripts/install-deps.sh build

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DGS_WERROR=ON $(CMAKE_FLAGS)

# The library and tools need only the build packages (no root once they are
# there); without CMocka the unit tests are left out of this build.
build: deps-build $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# The test packages, then a configure that finds what they brought.
build-test: deps $(BUILD)/CMakeCache.txt
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS) > /dev/null
	cmake --build $(BUILD) -j $(JOBS)

docs: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) --target docs

install: build
	cmake --install $(BUILD) $(if $(PREFIX),--prefix $(PREFIX))

run: build
	$(BUILD)/tools/gsrun -n $(NP) --timeout 120 $(BUILD)/examples/allreduce 1000000
	$(BUILD)/tools/gsrun -n $(NP) --timeout 300 $(BUILD)/bench/gs-bench allreduce -b 4K -e 64M -f 4 -w 2 -n 5 --check

# CTEST_JOBS=N runs N tests at once (ctest -j; .ci/run uses 2): every deadline holds with
# the machine loaded (CONTRIBUTING.md, "Deadlines"), and tests of several ranks reserve
# cores (PROCESSORS), so they run alone.
CTEST_JOBS ?= 1
test: build-test
	cd $(BUILD) && ctest --output-on-failure --timeout 600 -j $(CTEST_JOBS)

# The suite on a busy machine: every deadline must hold with two cores' worth of load
# beside it (CONTRIBUTING.md, "Deadlines").
test-loaded: build-test
	bash scripts/test-loaded.sh $(BUILD)

test-unit: build-test
	cd $(BUILD) && ctest --output-on-failure -L unit

# The static checks, each with its checked-in configuration (.clang-format,
# .clang-tidy, .cppcheck-suppressions); CI runs the format check first and the others
# beside the fuzz stage (.ci/run).
lint: deps
	LINT_BUILD=$(LINT_BUILD) LINT_JOBS=$(JOBS) bash scripts/lint.sh $(LINT_STEPS)

test-python: build-test
	cd $(BUILD) && ctest --output-on-failure -L python

# The sanitizer pass skips the 'large' runs (gigabytes), the 'exhaustive' ones (more world
# sizes, host layouts and lab repeats of code that a smaller test of the same family already
# runs under the sanitizers), the network lab's ('net': the same TCP code over veth links
# that the loopback tests run) and the checks of scripts and sources ('static': a sanitizer
# finds nothing in a shell script; the labels are set in tests/*/CMakeLists.txt).
test-asan: deps
	@# -O1, as the sanitizers' docs advise: the same findings, the suite in 60% of -O0's time.
	@# Without CUDA: the sanitizers and the CUDA runtime do not mix, and this pass is
	@# also the proof that everything builds and passes without CUDA.
	cmake -S . -B $(ASAN_BUILD) -DGS_WERROR=ON -DGS_ASAN=ON -DGS_UBSAN=ON -DGS_BUILD_BENCH=OFF \
	      -DGS_WITH_CUDA=OFF \
	      -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_C_FLAGS_DEBUG=-g -O1" "-DCMAKE_CXX_FLAGS_DEBUG=-g -O1" \
	      $(CMAKE_FLAGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 GSTEST_TIMEOUT_MULT=3 \
	    ctest --output-on-failure --timeout 900 -LE 'large|mpi|exhaustive|net|static'
	@# Open MPI leaks its own allocations at exit (op tables, MCA components it
	@# unloads), so the MPI tests run with ASan's memory checks but not LSan.
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 GSTEST_TIMEOUT_MULT=3 \
	    ctest --output-on-failure --timeout 900 -L mpi -LE exhaustive

# The tests ThreadSanitizer runs in CI (about 4 minutes on 2 cores): one or
# two of each family where threads meet (the worker and the caller, progress,
# abort from another thread, heartbeats, the bucketer's hooks, the parameter
# server's service thread, p2p groups and probes, mismatch reports, the dump
# signal's thread, shrink), not the matrix of world sizes and dtypes that
# drives the same code paths. TSAN_TESTS=. runs every unit and integration
# test (about 10 minutes).
TSAN_TESTS ?= ^(unit_test_(worker|tcp_.*|bucket|ps|recorder|auth|shm_ring|bootstrap|kvserver)|grow_revoke|p2p_(order_w3|api_w2|api_w3)|abort_.*|bucket_(w2|straggler_w2)|ps_exact_w2_(bsp|ssp)|ps_exact_w4_asp|ps_bound_w4_ssp2|ps_fault|ps_codec_w3_int8|fault_(kill|stop)|diag_(mismatch_kind_w3|timeout_w2|signal_w2)|shrink_fault|coll_w2_algo_(tree|rd|rabenseifner)|compress_w3|stats_w2|auth|coll_w4_noshm|coll_w3_shm_4k_nsocks3)$$

# ThreadSanitizer over the tests that run threads (TSAN_TESTS above), then
# the MPI tests. Not the Python tests
# (the interpreter cannot load a TSan library), nor the large, exhaustive and
# net ones (time). Suppressions: tests/tsan.supp (Open MPI only, each with its
# reason). -O1 as for the ASan pass.
test-tsan: deps
	cmake -S . -B $(TSAN_BUILD) -DGS_WERROR=ON -DGS_TSAN=ON -DGS_BUILD_BENCH=OFF -DGS_WITH_CUDA=OFF \
	      -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_C_FLAGS_DEBUG=-g -O1" "-DCMAKE_CXX_FLAGS_DEBUG=-g -O1" \
	      $(CMAKE_FLAGS)
	cmake --build $(TSAN_BUILD) -j $(JOBS)
	cd $(TSAN_BUILD) && \
	    TSAN_OPTIONS="suppressions=$(CURDIR)/tests/tsan.supp second_deadlock_stack=1 exitcode=66" \
	    GSTEST_TIMEOUT_MULT=3 ctest --output-on-failure --timeout 900 -j $(JOBS) \
	    -L 'unit|integration' -LE 'large|exhaustive|mpi|net|python|torch|static' -R '$(TSAN_TESTS)'
	@# The MPI tests, with the Open MPI entries of tests/tsan.supp and the longest history:
	@# an access inside Open MPI whose stack TSan could not restore matched no entry (CI at
	@# 72fa588, mpi_coll_w3_detect: "Previous write ... [failed to restore the stack]").
	cd $(TSAN_BUILD) && \
	    TSAN_OPTIONS="suppressions=$(CURDIR)/tests/tsan.supp second_deadlock_stack=1 exitcode=66 history_size=7" \
	    GSTEST_TIMEOUT_MULT=3 ctest --output-on-failure --timeout 900 -j $(JOBS) \
	    -L mpi -LE 'large|exhaustive'

# libFuzzer (clang, with ASan and UBSan). The library itself is built with
# -fsanitize=fuzzer-no-link so that the fuzzer sees the decoders' coverage.
# clang 14 misnames the symbols of non-static target_clones functions, so
# this build leaves the SIMD clones out, as the TSan build does.
fuzz: deps
	cmake -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
	      -DGS_FUZZ=ON -DGS_ASAN=ON -DGS_UBSAN=ON -DGS_BUILD_BENCH=OFF -DGS_WITH_CUDA=OFF \
	      -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_C_FLAGS_DEBUG=-g -O1" \
	      "-DCMAKE_C_FLAGS=-fsanitize=fuzzer-no-link -DGS_CODEC_TSAN=1 -DGS_REDUCE_TSAN=1"
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_all
	bash tests/fuzz/run_fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_JOBS)

# The soak test: every result checked, operations, bytes, errors and peak RSS
# at the start and the end (tests/soak/README.md).
soak: build
	cmake --build $(BUILD) -j $(JOBS) --target gs_soak
	$(BUILD)/tools/gsrun -n 4 --no-tag-output --timeout $$(( $(SOAK_SECONDS) * 6 / 5 + 300 )) \
	    $(BUILD)/tests/soak/gs_soak --seconds $(SOAK_SECONDS)

test-gpu:
	bash tests/gpu/run.sh $(GPU_ARGS)

bench: build
	$(BUILD)/tools/gsrun -n $(NP) --timeout 900 $(BUILD)/bench/gs-bench allreduce -b 4K -e 256M -f 2 -w 3 -n 10

bench-auto: build
	$(BUILD)/tools/gsrun -n $(NP) --timeout 900 $(BUILD)/bench/gs-bench allreduce -b 4K -e 64M -f 4 \
	    -w 3 -n 20 --inplace --algo auto,ring,tree,rd,rabenseifner --rounds 3

bench-compare: build
	bash bench/compare/compare.sh $(BUILD) -n $(NP)

bench-net: build
	bash bench/net/bench_net.sh $(BUILD)

bench-scale: build
	bash bench/scale/bench_scale.sh $(BUILD) --tsv $(BUILD)/bench_scale.tsv $(SCALE_ARGS)
	python3 bench/scale/simulate.py --tsv $(BUILD)/bench_scale.tsv

bench-net-rails: build
	bash bench/net/bench_rails.sh $(BUILD) $(RAILS_ARGS)

bench-elastic: build
	bash bench/elastic/bench_elastic.sh $(BUILD) $(ELASTIC_ARGS)

bench-net-sharded: build
	bash bench/net/bench_net.sh $(BUILD) --colls reduce_scatter,allgather --rounds 5

bench-fsdp: build
	bash bench/net/bench_fsdp.sh $(BUILD) --rate 100mbit,1gbit --rounds 3

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD) $(LINT_BUILD)

# The torch 2.x backend (the C++ extension, built into $(BUILD)/torch-ext) beside gloo in the
# torch virtual environment, and gs-bench on the same ranks (bench/torch/bench_torch.py).
bench-torch: build
	bash tests/torch/run_torch2.sh build $(abspath $(BUILD))/libgradsync.so $(CURDIR) \
	    $(abspath $(BUILD))
	OMP_NUM_THREADS=1 GRADSYNC_LIBRARY=$(abspath $(BUILD))/libgradsync.so \
	    PYTHONPATH=$(CURDIR)/python \
	    GRADSYNC_TORCH_EXTENSION=$$(ls $(abspath $(BUILD))/torch-ext/_C*.so | head -n 1) \
	    "$$(bash scripts/install-deps.sh --torch-venv-path)/bin/python" \
	    bench/torch/bench_torch.py --build $(BUILD) --nprocs $(NP)

bench-plots: build
	bash scripts/bench-plots.sh --run $(BUILD)
