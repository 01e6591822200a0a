# setl: `make demo` sets up and runs the demo, `make test` sets up and runs every check.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.setup-done
PROTOC := $(BIN)/python -m grpc_tools.protoc -Ishared/rpc=proto

.PHONY: setup system-packages demo demo-down test proto reference check-proto lint unit integration clean \
	bench bench-copy bench-bulk bench-delay bench-noisy bench-catchup bench-catchup-alone bench-profile bench-stream \
	bench-decode bench-decode-worker bench-lake bench-subscribe chaos

setup: system-packages $(STAMP)
	@$(BIN)/python scripts/compile.py

system-packages:
	@scripts/install-system-packages.sh

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -e '.[dev]'
	touch $@

proto: $(STAMP)
	$(PROTOC) --python_out=. --pyi_out=. proto/*.proto
	$(PROTOC) --grpc_python_out=. proto/manager.proto proto/node.proto

# CI fails when the committed generated code differs from what `make proto` produces.
check-proto: proto
	@git diff --exit-code --stat -- shared/rpc || \
	  (echo "shared/rpc/ is stale: run 'make proto' and commit the result" >&2; exit 1)
	@test -z "$$(git status --porcelain -- shared/rpc)" || \
	  (echo "shared/rpc/ has uncommitted generated files: run 'make proto' and commit" >&2; exit 1)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports

unit: $(STAMP)
	$(BIN)/python -m pytest tests/unit -q

integration: setup
	$(BIN)/python -m pytest tests/integration -q

# The whole run has a ceiling: past it, SIGABRT makes faulthandler print every thread's stack.
# The unit tests and the quiet integration modules run beside the rest (scripts/runtests.py).
test: setup check-proto lint
	timeout --signal=ABRT --kill-after=60 2700 $(BIN)/python scripts/runtests.py

demo: setup
	$(BIN)/python scripts/demo.py

# docs/reference/ from the code (a unit test fails when it is not current)
reference: $(STAMP)
	$(BIN)/python scripts/reference.py

# Benchmarks (not part of `make test`; a smoke run of the same code is): setl side by side
# with a native MariaDB replica and mydumper|myloader; results in bench/results/.
bench: setup
	$(BIN)/python -m bench.peers
	$(BIN)/python -m bench.lake
	$(BIN)/python -m bench.subscribe

bench-copy bench-bulk bench-delay bench-noisy bench-catchup: setup
	$(BIN)/python -m bench.peers --scenarios $(@:bench-%=%)

# the catch-up with each copy crossing the backlog alone (the machine to itself)
bench-catchup-alone: setup
	$(BIN)/python -m bench.peers --scenarios catchup --catchup-alone

bench-lake: setup
	$(BIN)/python -m bench.lake

bench-subscribe: setup
	$(BIN)/python -m bench.subscribe

bench-profile: setup
	$(BIN)/python -m bench.peers --scenarios catchup --profile

bench-stream: setup
	$(BIN)/python -m bench.stream

bench-decode: setup
	$(BIN)/python -m bench.decode

# the workers' row decoder (node.extract.decode) alone, against Select's path per row
bench-decode-worker: setup
	$(BIN)/python -m bench.decode --worker


clean:
	-$(BIN)/setl sandbox down
	rm -rf $(VENV) .sandbox .pytest_cache .ruff_cache *.egg-info

demo-down: $(STAMP)
	$(BIN)/python scripts/demo.py down

# Chaos soak: faults of every kind under load on two nodes; `make chaos MINUTES=10`.
MINUTES ?= 10
chaos: setup
	$(BIN)/python -m bench.chaos --minutes $(MINUTES)
