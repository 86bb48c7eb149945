# Front door: `make test` and `make demo` work on a fresh Debian 12 machine as root.
BUILD    ?= build
PREFIX   ?= /opt/cni/bin
JOBS     ?= $(shell nproc)

# Debian packages we build and test with; installed only when missing.
DEB_DEPS := cmake g++ make pkg-config nlohmann-json3-dev libmnl-dev libcli11-dev doctest-dev libcurl4-openssl-dev openssl \
            iproute2 iputils-ping python3 containernetworking-plugins \
            podman runc containerd busybox-static

.PHONY: all deps build test demo install clean

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

$(BUILD)/build.ninja $(BUILD)/Makefile:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: deps $(BUILD)/Makefile
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure

demo: build
	/usr/bin/python3 examples/demo.py $(BUILD)/topocni

install: build
	install -D -m 0755 $(BUILD)/topocni $(DESTDIR)$(PREFIX)/topocni

clean:
	rm -rf $(BUILD)
