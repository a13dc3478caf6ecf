#!/bin/bash
# Harbor's contract: write the reward to /logs/verifier/reward.txt. 1.0 for exactly the expected name,
# 0.25 for the name inside a short answer, 0 otherwise (empty answers included).
python3 /tests/check.py "$(cat /tests/expected.txt)" /app/answer.txt > /logs/verifier/reward.txt
