#!/bin/bash
# Writes reward.json (Harbor's other reward file): reward 1 when /app/answer.txt holds the count, else 0.
expected=4
answer=$(tr -d '[:space:]' < /app/answer.txt 2>/dev/null || true)
if [ "$answer" = "$expected" ]; then reward=1; else reward=0; fi
printf '{"reward": %s, "answered": %s}\n' "$reward" "$([ -n "$answer" ] && echo 1 || echo 0)" \
  > /logs/verifier/reward.json
