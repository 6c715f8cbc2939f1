# edgemem's two entry points on a fresh machine: `make demo` and `make test`.
# Both install what is missing first: the Arm toolchain, QEMU and Chromium (apt; Chromium for the report test)
# and the Python environment (.venv).

PYTHON ?= python3
VENV   ?= .venv
APT_PACKAGES = gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm gcc clang chromium cmake
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
MODEL ?= examples/kws_tiny_int8.tflite
BOARD ?= stm32f746

.PHONY: setup toolchain demo test models clean

setup: toolchain $(VENV)/.installed

toolchain:
	@command -v arm-none-eabi-gcc >/dev/null && command -v qemu-system-arm >/dev/null \
	  && command -v gcc >/dev/null && command -v clang >/dev/null && command -v chromium >/dev/null && command -v cmake >/dev/null \
	  || ($(SUDO) apt-get update && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y $(APT_PACKAGES))

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q -e '.[reference,test]'
	touch $@

demo: setup
	$(VENV)/bin/edgemem build --board $(BOARD) $(MODEL) -o out/demo --force --run

# One pytest worker per core (pytest-xdist), whole test files per worker so module-scoped builds are shared.
test: setup
	$(VENV)/bin/python -m pytest -q -n auto --dist loadfile

# The converter-made test models (tests/models/): TensorFlow's own converter in a venv of its own (dev-only:
# tests and CI read the committed .tflite files and need no TensorFlow).
TF_VENV ?= .venv-tf
models:
	test -x $(TF_VENV)/bin/python || ($(PYTHON) -m venv $(TF_VENV) && $(TF_VENV)/bin/pip install -q tensorflow-cpu==2.21.0 tf-keras==2.21.0)
	for g in tests/models/gen_*.py; do $(TF_VENV)/bin/python $$g || exit 1; done

clean:
	rm -rf out build .pytest_cache
