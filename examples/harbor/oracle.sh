#!/usr/bin/env bash
# Harbor's oracle agent as a harness: runs the attempt's task's own solution/solve.sh in the workspace
# (harnessrl.harbor.oracle). It reads tasks/ beside this script, which a sandboxed attempt cannot see: hence
# [runner] sandbox = "none" in oracle.toml.
exec python -I -m harnessrl.harbor.oracle "$(cd "$(dirname "$0")" && pwd)/tasks"
