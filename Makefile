# hgpc developer entry points. `make demo` and `make test` work on a fresh Debian 12 machine:
# `make deps` installs whatever Debian packages are missing first.
BUILD ?= build
# make demo DEMO_IMAGES=1 also trains from a folder of JPEG files (samples/demo.sh).
DEMO_IMAGES ?= 0
JOBS ?= $(shell nproc)
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release

# Build tools and libraries, test tooling (through Debian's /usr/bin/python3), and test data.
# Open MPI (mpirun, libmpi.so.40) is only for tests: the mpi_bootstrap test runs 2 ranks under
# mpirun, and tests/gpu/device_run.sh --pack takes it to the GPU machine. Nothing links it.
DEB_PACKAGES := cmake ninja-build g++ clang libclang-rt-14-dev llvm-14-dev zlib1g-dev \
  libonnx-dev libprotobuf-dev protobuf-compiler libcli11-dev libgtest-dev \
  python3-torch python3-torchvision python3-onnx python3-numpy \
  libonnx-testdata dataset-fashion-mnist openmpi-bin libopenmpi3 \
  libturbojpeg0-dev libpng-dev python3-pil

.PHONY: all build deps test test-slow demo dist clean format

all: build

deps:
	@missing=$$(for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed$$' || echo $$p; \
	done); \
	if [ -n "$$missing" ]; then \
	  echo "make deps: installing" $$missing; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi

$(BUILD)/build.ninja: CMakeLists.txt
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS)

build: $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# Everything but the tests labelled `slow` (see tests/CMakeLists.txt); `gpu` tests skip without a GPU.
test: deps
	$(MAKE) build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE slow

test-slow: deps
	$(MAKE) build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -L slow

demo: deps
	$(MAKE) build
	DEMO_IMAGES=$(DEMO_IMAGES) ./samples/demo.sh $(BUILD)

# A tarball with hgpc, the runner and the non-system libraries hgpc needs, for another machine.
dist: deps
	$(MAKE) build
	scripts/dist.sh $(BUILD) $(BUILD)/hgpc-dist.tar.gz

format:
	git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' | xargs clang-format -i

clean:
	rm -rf $(BUILD)
