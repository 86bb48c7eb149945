# Front door: `make test` and `make demo` work on a fresh Debian 12 machine as root.
#   make test           build (test build: failpoints compiled in) and run every test
#   make demo           attach a pod end to end in throwaway namespaces
#   make install        install the release binaries to $(PREFIX)/topocni and topocni-dra
#   make deb            build a Debian package installing /opt/cni/bin/topocni{,-dra}
BUILD         ?= build
RELEASE_BUILD ?= build-release
PREFIX        ?= /opt/cni/bin
JOBS          ?= $(shell nproc)

# Debian packages we build and test with; installed only when missing.
DEB_DEPS := cmake g++ clang libclang-rt-14-dev make pkg-config nlohmann-json3-dev libmnl-dev libcli11-dev doctest-dev libboost-dev libssl-dev libc-ares-dev \
            libnl-3-dev libnl-route-3-dev libyaml-dev \
            openssl iproute2 iputils-ping python3 python3-yaml containernetworking-plugins \
            podman runc containerd busybox-static time \
            libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler python3-grpcio python3-protobuf

# One clang build with ASan and UBSan (build-san/) holds both the libFuzzer targets and the
# sanitizer build of the whole suite: every source compiled once for the two.
SAN_BUILD     ?= build-san
# ctest runs this many tests at once: each integration test makes its own namespaces, links
# and temp dirs (named with its pid), and most of their time is spent waiting on the kernel,
# sockets and timers, so two cores serve more than two.
TEST_JOBS     ?= 4
FUZZ_SECONDS  ?= 60
FUZZ_TARGETS  := $(patsubst tests/fuzz/%.cc,fuzz_%,$(wildcard tests/fuzz/*.cc))

# kube-scheduler's DRA allocator as the DRA parity tests' oracle (tests/dra_allocator: a Go
# module pinned to k8s.io/kubernetes v1.37.2 and its staging modules at v0.37.2, from the
# Go module proxy). Go's own module and build caches keep a second build to a link. Built
# when Go is installed; without it the tests that need it report a skip saying so.
GO            ?= $(shell command -v go 2>/dev/null || ls /usr/local/go/bin/go 2>/dev/null)
GO_BUILD      ?= build-go
DRA_ALLOCATOR := $(abspath $(GO_BUILD))/dra-allocator
TEST_ENV       = TOPOCNI_RELEASE_BUILD=$(abspath $(RELEASE_BUILD)) TOPOCNI_DRA_ALLOCATOR=$(DRA_ALLOCATOR)

.PHONY: all deps dra-allocator cluster-tools test-cluster cluster-up cluster-down build release test demo install deb bench san-configure fuzz-build fuzz test-sanitize clean

all: build

deps:
	@missing=""; for p in $(DEB_DEPS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing; \
	fi

dra-allocator:
	@if [ -n "$(GO)" ]; then \
	  cd tests/dra_allocator && CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=false -o $(DRA_ALLOCATOR) . ; \
	else echo "Go is not installed: tests/dra_allocator not built (the DRA parity tests will skip)"; fi

# The upstream binaries the cluster tests run (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubelet v1.37.2 and etcd v3.6.16, from the Go module proxy), built once into
# a cache outside the repository keyed by everything that shapes them (tests/cluster_tools/build.py).
cluster-tools:
	/usr/bin/python3 tests/cluster_tools/build.py

# topocni's cluster side against that real control plane: examples/ applied as shipped, the
# agents on five node stand-ins, the webhook, the extender, refusals and faults (tests/cluster).
CLUSTER_DIR   ?= /tmp/topocni-cluster
test-cluster: release cluster-tools
	TOPOCNI_RELEASE_BUILD=$(abspath $(RELEASE_BUILD)) /usr/bin/python3 tests/cluster/run.py

# The same cluster kept up to try things on (admin kubeconfig in $(CLUSTER_DIR)).
cluster-up: release cluster-tools
	TOPOCNI_RELEASE_BUILD=$(abspath $(RELEASE_BUILD)) /usr/bin/python3 tests/cluster/up.py up $(CLUSTER_DIR)

cluster-down:
	/usr/bin/python3 tests/cluster/up.py down $(CLUSTER_DIR)

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTOPOCNI_FAILPOINTS=ON
	cmake --build $(BUILD) -j $(JOBS)

release: deps
	cmake -S . -B $(RELEASE_BUILD) -DCMAKE_BUILD_TYPE=Release -DTOPOCNI_FAILPOINTS=OFF
	cmake --build $(RELEASE_BUILD) -j $(JOBS) --target topocni topocni-dra

# Every test: unit, integration, and every fuzz target's seeds replayed (fuzz.replay.*),
# all under ctest.
test: build release dra-allocator
	cd $(BUILD) && $(TEST_ENV) ctest --output-on-failure -j $(TEST_JOBS)

# The whole suite again with AddressSanitizer and UndefinedBehaviorSanitizer, then each
# libFuzzer target (same build) fuzzing for a few seconds from its seeds.
test-sanitize: deps release san-configure dra-allocator
	cmake --build $(SAN_BUILD) -j $(JOBS)
	cd $(SAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  TOPOCNI_CHURN_CYCLES=500 TOPOCNI_PARITY_NODES=3 $(TEST_ENV) ctest --output-on-failure -j $(TEST_JOBS)
	tests/fuzz/run.sh $(SAN_BUILD) 5

san-configure: deps
	CC=clang CXX=clang++ cmake -S . -B $(SAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DTOPOCNI_FAILPOINTS=ON -DTOPOCNI_FUZZ=ON

# libFuzzer targets (clang), one per parser of outside input.
fuzz-build: san-configure
	cmake --build $(SAN_BUILD) -j $(JOBS) --target $(FUZZ_TARGETS)

fuzz: fuzz-build
	tests/fuzz/run.sh $(SAN_BUILD) $(FUZZ_SECONDS)

demo: release
	/usr/bin/python3 examples/demo.py $(RELEASE_BUILD)/topocni

install: release
	install -D -m 0755 $(RELEASE_BUILD)/topocni $(DESTDIR)$(PREFIX)/topocni
	install -D -m 0755 $(RELEASE_BUILD)/topocni-dra $(DESTDIR)$(PREFIX)/topocni-dra

deb: release
	cd $(RELEASE_BUILD) && cpack -G DEB
	@ls $(RELEASE_BUILD)/*.deb

# Side by side with Debian's reference plugins; writes bench/results/ (see README).
bench: release
	cmake --build $(RELEASE_BUILD) -j $(JOBS) --target bench_floor
	/usr/bin/python3 bench/run.py --topocni $(RELEASE_BUILD)/topocni --floor $(RELEASE_BUILD)/bench_floor \
	  --out bench/results
	/usr/bin/python3 bench/extender.py --topocni $(RELEASE_BUILD)/topocni --out bench/results
	/usr/bin/python3 bench/admission.py --topocni $(RELEASE_BUILD)/topocni --out bench/results
	/usr/bin/python3 bench/dra.py --topocni $(RELEASE_BUILD)/topocni --out bench/results
	/usr/bin/python3 bench/dra_kubelet.py --topocni $(RELEASE_BUILD)/topocni --out bench/results

clean:
	rm -rf $(BUILD) $(RELEASE_BUILD) $(SAN_BUILD) $(GO_BUILD) build-asan build-fuzz
