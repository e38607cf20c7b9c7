#!/usr/bin/env bash
# Prints 12 hex digits naming this CPU: its model and instruction-set flags. What is built with
# -march=native, or computed by such a build, is cached under this key, so that nothing made on one
# CPU is used on another.
set -euo pipefail
{
    grep -m1 -E '^(model name|Model|cpu model)' /proc/cpuinfo || true
    grep -m1 -E '^(flags|Features|isa)' /proc/cpuinfo || true
    uname -m
} | sha256sum | cut -c1-12
