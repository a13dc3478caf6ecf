#!/bin/bash
# Runs the tests against the agent's /app/stats.py; 1 when they all pass, else 0.
if python3 /tests/test_stats.py; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
