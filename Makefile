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
# The stamp names the extras too: `make venv EXTRAS=test` then `make test` installs the rest.
STAMP_KEY := $(shell cat pyproject.toml Makefile | cksum | cut -d' ' -f1)
STAMP := $(VENV)/.installed-$(STAMP_KEY)-$(subst $(comma),-,$(EXTRAS))
# `make lint` needs ruff, mypy and the package's own dependencies, never the embedded model: on a
# fresh checkout it installs those alone, and uses the full install when that one has the lint extra.
LINT_STAMP := $(if $(and $(wildcard $(STAMP)),$(findstring $(comma)lint$(comma),$(comma)$(EXTRAS)$(comma))),$(STAMP),$(VENV)/.installed-$(STAMP_KEY)-lint-only)

# setuptools says, on every editable install, that folders named like the package may shadow it:
# true of any checkout, and nothing to act on.
QUIET_BUILD := PYTHONWARNINGS="ignore:Editable installation"

.PHONY: test check durations lint format demo venv link bench clean

# Prebuilt wheels only, the embedded model's llama.cpp included (xllamacpp): nothing is compiled.
$(STAMP):
	@echo "Installing papayu-git[$(EXTRAS)] into $(VENV) (prebuilt wheels: about a minute, the first time on a machine longer)"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(PIP) install --quiet --upgrade pip
	@$(QUIET_BUILD) $(PIP) install --quiet -e ".[$(EXTRAS)]"
	@rm -f $(VENV)/.installed-*
	@touch $(STAMP)

$(VENV)/.installed-$(STAMP_KEY)-lint-only:
	@echo "Installing papayu-git[lint,test] into $(VENV) for the lint gate"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(PIP) install --quiet --upgrade pip
	@$(QUIET_BUILD) $(PIP) install --quiet -e ".[lint,test]"
	@touch $@

$(MAN): man/git-papayu.1 $(STAMP)
	@mkdir -p $(dir $@)
	@cp man/git-papayu.1 $@

venv: $(STAMP) $(MAN)
	@:

# The Quickstart's install: git-papayu and its man page linked into PREFIX, nothing else of .venv
# on PATH. man looks in <dir>/../share/man for each <dir> on PATH, so `git papayu --help` (which
# git turns into `man git-papayu`) finds the page beside the command.
PREFIX ?= $(HOME)/.local
link: venv
	@mkdir -p "$(PREFIX)/bin" "$(PREFIX)/share/man/man1"
	@ln -sf "$(abspath $(BIN))/git-papayu" "$(PREFIX)/bin/"
	@ln -sf "$(abspath $(MAN))" "$(PREFIX)/share/man/man1/"
	@echo "linked $(PREFIX)/bin/git-papayu and $(PREFIX)/share/man/man1/git-papayu.1 into .venv"

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
