# spotcron — every target installs what it needs on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
JOBS   ?= jobs

.DEFAULT_GOAL := help
.PHONY: help install run test lint bench reliability plan deploy e2e schema clean tools

help: ## show the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@echo "Installing spotcron and its dependencies into $(VENV)/ (once): mostly PyTorch for the example"
	@echo "benchmark, 750 MB or more; several minutes the first time, bound by your connection."
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	@touch $(STAMP)

install: $(STAMP) ## create .venv and install spotcron with its test tools

run: $(STAMP) ## run every example job once, end to end, locally; then show the runs
	$(BIN)/spotcron validate $(JOBS)
	$(BIN)/spotcron up --once --jobs $(JOBS)
	$(BIN)/spotcron runs
	$(BIN)/spotcron report dl-benchmark --jobs $(JOBS)
	$(BIN)/spotcron cost --jobs $(JOBS)
	@echo "spotcron is in $(BIN)/: '. $(BIN)/activate' puts it on PATH (or run $(BIN)/spotcron); 'pipx install .' installs it as a tool for any folder"

# One worker per core: most of the suite's time is spent waiting on subprocesses (local stacks,
# runners, chromium), which a second worker overlaps. The tests of a module with a module-wide fixture
# stay on one worker (tests/conftest.py), so it is made once. `make test PYTEST_WORKERS=0`: one process.
PYTEST_WORKERS ?= auto
test: $(STAMP) ## run the whole test suite (in parallel, one worker per core)
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadgroup

lint: $(STAMP) ## ruff on the code, shellcheck on the VM scripts
	$(BIN)/ruff check spotcron functions tests bench vm_images setup.py
	$(BIN)/shellcheck vm_images/runner/*.sh

bench: $(STAMP) ## print speed and cost figures, each beside its baseline
	$(BIN)/python -m bench

reliability: $(STAMP) ## a long seeded fault simulation; prints the figures
	$(BIN)/python -m spotcron.testing.simulation --days 30 --jobs 60 --seed 7 --vm-hours-per-day 120 --deploy-every-hours 3 \
	  --reliability-map tests/RELIABILITY.md

e2e: $(STAMP) ## on a throwaway project (SPOTCRON_E2E_PROJECT): doctor, deploy, no-change replan, one scheduled run, storage contracts, destroy
	$(BIN)/python -m tests.e2e

EXPLORE_EXAMPLES ?= 400
EXPLORE_STEPS ?= 60
explore: $(STAMP) ## Hypothesis explores interleavings of the real functions far longer than make test; prints its seed
	@seed=$${SEED:-$$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}; echo "explore: seed $$seed (again: make explore SEED=$$seed)"; \
	SPOTCRON_EXPLORE_EXAMPLES=$(EXPLORE_EXAMPLES) SPOTCRON_EXPLORE_STEPS=$(EXPLORE_STEPS) \
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/reliability/test_exploration.py -k TestExploration --timeout=0 \
	  --hypothesis-seed=$$seed --hypothesis-show-statistics

schema: $(STAMP) ## regenerate jobs/schema.json from the spec model
	$(BIN)/spotcron schema > $(JOBS)/schema.json

plan: $(STAMP) ## show what deploy would change on Google Cloud
	$(BIN)/spotcron deploy --dry-run --jobs $(JOBS)

deploy: $(STAMP) ## apply jobs/ and infra/stack.yaml to Google Cloud (asks first)
	$(BIN)/spotcron deploy --jobs $(JOBS)

clean: ## remove the virtualenv and local state
	rm -rf $(VENV) .spotcron .pytest_cache

tools: ## install the tools some tests use (podman, runc, busybox-static, chromium, shellcheck); root + apt-get only
	@pkgs="podman runc busybox-static chromium shellcheck cloud-init"; \
	if ! command -v apt-get >/dev/null 2>&1; then \
	  echo "tools: no apt-get here; skipped $$pkgs (the tests that need them skip)"; \
	elif [ "$$(id -u)" != 0 ]; then \
	  echo "tools: not root; skipped $$pkgs (run: sudo make tools)"; \
	else \
	  have() { dpkg-query -W -f='$${Status}' "$$1" 2>/dev/null | grep -q ' installed$$'; }; \
	  missing=""; \
	  for p in $$pkgs; do have $$p || missing="$$missing $$p"; done; \
	  if [ -z "$$missing" ]; then echo "tools: $$pkgs already installed"; exit 0; fi; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq || echo "tools: apt-get update failed; using the package lists at hand"; \
	  apt-get install -y -qq $$missing >/dev/null 2>&1 || \
	  for p in $$missing; do \
	    apt-get install -y -qq $$p >/dev/null 2>&1 || echo "tools: $$p unavailable; skipped"; \
	  done; \
	  for p in $$missing; do have $$p && echo "tools: installed $$p"; done; \
	fi; true
