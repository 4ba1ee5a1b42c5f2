# Everything a fresh machine with Python >= 3.11 and git needs is installed from here.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip
comma := ,
# Editable installs skip data files: copy the man page `git papayu --help` shows by hand.
MAN := $(VENV)/share/man/man1/git-papayu.1
EXTRAS ?= test,local,lint
# The suite spreads over worker processes (pytest-xdist): most tests wait on git, bwrap and other
# subprocesses. One worker per core (auto): more only slowed the CPU-bound tests (the local model).
# TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= auto
# The embedded model's llama.cpp is built for any CPU of the machine's architecture, never for the
# build machine's own (GGML_NATIVE would use every extension this CPU has and crash on another one):
# x86-64 gets the common baseline (AVX2, FMA, F16C: every x86-64 CPU since 2013), other
# architectures the compiler's portable default. Wheels built with other flags are never reused:
# the pip cache for llama-cpp-python is keyed by these flags.
ARCH := $(shell uname -m)
ifeq ($(ARCH),x86_64)
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF
else
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF
endif
LLAMA_CACHE := $(HOME)/.cache/papayu-git/llama-$(shell echo '$(LLAMA_CMAKE_ARGS)' | cksum | cut -d' ' -f1)
# The stamp names the extras too: `make venv EXTRAS=test` then `make test` installs the rest.
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml Makefile | cksum | cut -d' ' -f1)-$(subst $(comma),-,$(EXTRAS))

.PHONY: test lint format demo venv bench clean

$(STAMP):
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	@case ",$(EXTRAS)," in *,local,*) echo "make: installing the embedded model's llama.cpp (llama-cpp-python): a first build compiles it, silently, for 15-25 minutes on 2 cores; later ones reuse the wheel cached in $(LLAMA_CACHE). To skip the local model: make $(or $(MAKECMDGOALS),venv) EXTRAS=test,lint";; esac
	case ",$(EXTRAS)," in *,local,*) CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" FORCE_CMAKE=1 \
	  $(PIP) install --quiet --cache-dir "$(LLAMA_CACHE)" "llama-cpp-python[server]>=0.3";; esac
	$(PIP) install --quiet -e ".[$(EXTRAS)]"
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

$(MAN): man/git-papayu.1 $(STAMP)
	mkdir -p $(dir $@)
	cp man/git-papayu.1 $@

venv: $(STAMP) $(MAN)

test: $(STAMP) $(MAN)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

# The gate .ci/run and .pre-commit-config.yaml run: lint, formatting (checked, not applied), types.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# Applies what `make lint` only checks.
format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

demo: $(STAMP) $(MAN)
	$(BIN)/python demo/run_demo.py

bench: $(STAMP) $(MAN)
	for b in bench/*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) build dist *.egg-info demo-work
