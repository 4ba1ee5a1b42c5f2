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
# llama-cpp-python ships no wheels on PyPI: it is built from source (5-20 min on 2 cores), once
# per machine. The built wheel is kept in a directory keyed by what makes it: the version (pinned:
# an unpinned one rebuilt at every upstream release), the flags, and the compiler and C library
# it was built with. The wheel itself is `py3-none`: any Python 3 of the machine loads it.
LLAMA_VERSION ?= 0.3.36
LLAMA_KEY := $(shell { echo '$(LLAMA_VERSION) $(LLAMA_CMAKE_ARGS)'; cc --version 2>&1 | head -1; \
  ldd --version 2>&1 | head -1; } | cksum | cut -d' ' -f1)
LLAMA_WHEELS := $(HOME)/.cache/papayu-git/llama-wheel-$(LLAMA_KEY)
# The stamp names the extras too: `make venv EXTRAS=test` then `make test` installs the rest.
STAMP_KEY := $(shell cat pyproject.toml Makefile | cksum | cut -d' ' -f1)
STAMP := $(VENV)/.installed-$(STAMP_KEY)-$(subst $(comma),-,$(EXTRAS))
# `make lint` needs ruff, mypy and the package's own dependencies, never llama.cpp (mypy does
# not follow llama_cpp: ignore_missing_imports): on a fresh checkout it installs those alone
# (a minute from cached wheels), and uses the full install when that one has the lint extra.
LINT_STAMP := $(if $(and $(wildcard $(STAMP)),$(findstring $(comma)lint$(comma),$(comma)$(EXTRAS)$(comma))),$(STAMP),$(VENV)/.installed-$(STAMP_KEY)-lint-only)

.PHONY: test check durations lint format demo venv bench clean llama-wheel

$(STAMP):
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	case ",$(EXTRAS)," in *,local,*) $(MAKE) --no-print-directory llama-wheel GOAL="$(or $(MAKECMDGOALS),venv)" && \
	  $(PIP) install --quiet --find-links "$(LLAMA_WHEELS)" "llama-cpp-python[server]==$(LLAMA_VERSION)";; esac
	$(PIP) install --quiet -e ".[$(EXTRAS)]"
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

# Said before the long silent step, not after it. The wheel is built into a private directory
# and moved into place whole: an interrupted build leaves nothing that looks built. A wheel of
# the same version that pip built earlier with the same flags (its cache, LLAMA_CACHE) is reused.
llama-wheel:
	@built=$$(find "$(LLAMA_CACHE)" -name "llama_cpp_python-$(LLAMA_VERSION)-*.whl" 2>/dev/null | head -1); \
	if ls "$(LLAMA_WHEELS)"/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1; then \
	  echo "llama.cpp for the embedded model: reusing the wheel built earlier ($(LLAMA_WHEELS))"; \
	elif [ -n "$$built" ]; then \
	  echo "llama.cpp for the embedded model: reusing the wheel pip built earlier ($$built)"; \
	  mkdir -p "$(LLAMA_WHEELS)" && cp "$$built" "$(LLAMA_WHEELS)/"; \
	else \
	  echo "llama.cpp for the embedded model: building llama-cpp-python $(LLAMA_VERSION) from source, once per"; \
	  echo "  machine (no wheel on PyPI): about 5 min on an idle 2-core machine, up to 20 min on a busy one."; \
	  echo "  It is kept in $(LLAMA_WHEELS) for every later checkout."; \
	  echo "  Without the local model: make $(or $(GOAL),$(MAKECMDGOALS)) EXTRAS=test,lint (the tests marked local_llm skip)."; \
	  rm -rf "$(LLAMA_WHEELS).tmp.$$$$" && \
	  CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" FORCE_CMAKE=1 $(PIP) wheel --quiet --no-deps --cache-dir "$(LLAMA_CACHE)" \
	    --wheel-dir "$(LLAMA_WHEELS).tmp.$$$$" "llama-cpp-python==$(LLAMA_VERSION)" && \
	  mkdir -p "$(LLAMA_WHEELS)" && mv "$(LLAMA_WHEELS).tmp.$$$$"/*.whl "$(LLAMA_WHEELS)/" && \
	  rm -rf "$(LLAMA_WHEELS).tmp.$$$$"; \
	fi

$(VENV)/.installed-$(STAMP_KEY)-lint-only:
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e ".[lint,test]"
	touch $@

$(MAN): man/git-papayu.1 $(STAMP)
	mkdir -p $(dir $@)
	cp man/git-papayu.1 $@

venv: $(STAMP) $(MAN)

# Byte-compiled first: the suite starts papayu a few thousand times, and where
# PYTHONDONTWRITEBYTECODE is set (CI images often do) each start compiled the modules it
# imports again, ~150 ms of every apply.
test: $(STAMP) $(MAN)
	$(BIN)/python -m compileall -q -j 0 papayu_git tests >/dev/null
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

# The fast tier (docs/CONTRIBUTING.md, "Test tiers"): the suite without the tests that run a
# toolchain, build the wheel or a venv, pre-commit's hook environments or the local model, which
# tests/conftest.py marks from what each test uses (--fast leaves them out). `make test` runs all.
# It needs the test extra, never the local model's llama.cpp build (as `make lint`).
check: $(LINT_STAMP)
	mkdir -p $(dir $(MAN)) && cp man/git-papayu.1 $(MAN)
	$(BIN)/python -m compileall -q -j 0 papayu_git tests >/dev/null
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --fast $(PYTEST_ARGS)

# The whole suite once, recording what each test took: the fast tier's budget (tests/durations.json).
durations: $(STAMP) $(MAN)
	$(BIN)/python -m compileall -q -j 0 papayu_git tests >/dev/null
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --record-durations tests/durations.json $(PYTEST_ARGS)

# The gate .ci/run and .pre-commit-config.yaml run: lint, formatting (checked, not applied), types.
lint: $(LINT_STAMP)
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
