#!/bin/sh
# Makes the folder $1 a git repository whose one commit is the instance's base_commit. Author, committer
# and dates are fixed, so the commit's hash depends only on the files: the image build and the test that
# checks instances.jsonl (tests/unit/swebench) make the same commit. Prints its hash.
set -eu
cd "$1"
git init -q
git add -A
GIT_AUTHOR_NAME=statskit GIT_AUTHOR_EMAIL=statskit@example.invalid GIT_AUTHOR_DATE="2024-01-01T00:00:00+0000" \
GIT_COMMITTER_NAME=statskit GIT_COMMITTER_EMAIL=statskit@example.invalid \
GIT_COMMITTER_DATE="2024-01-01T00:00:00+0000" \
  git -c commit.gpgsign=false -c core.autocrlf=false commit -q -m "statskit 0.1"
git rev-parse HEAD
