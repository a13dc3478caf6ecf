#!/bin/bash
# 1 when /app/greeting.txt holds exactly "hello, harbor\n", else 0.
if [ -f /app/greeting.txt ] && [ "$(cat /app/greeting.txt; echo x)" = "$(printf 'hello, harbor\nx')" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
