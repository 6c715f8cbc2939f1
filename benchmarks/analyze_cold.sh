#!/bin/bash
# cold `edgemem analyze --json` per shared model, one fresh process each: wall, user, system seconds
cd "$(dirname "$0")/.."
for m in ../shared/models/*.tflite; do
  n=$(basename $m .tflite)
  /usr/bin/time -o "${TMPDIR:-/tmp}/analyze_time.txt" -f "%e %U %S" .venv/bin/edgemem analyze $m --board stm32f746 --json > /dev/null 2>&1
  echo "$n $(tail -1 "${TMPDIR:-/tmp}/analyze_time.txt")"
done
