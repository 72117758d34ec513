#!/usr/bin/env bash
# Does SIGTERM stop a run within seconds on this machine, leaving its manifest "interrupted"?
# Runs SCENARIO, samples the process's caught-signal mask (SigCgt: bit 2 is SIGINT, bit 15
# SIGTERM) every second, sends SIGTERM after AFTER seconds, then prints how long the run took to
# stop, its exit code and the manifest's status and message.
# Usage: tools/interrupt_check.sh OUTDIR SCENARIO [AFTER]
set -uo pipefail
out=$1 scen=$2 after=${3:-30}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
mkdir -p "$out/results"
python3 -m moebench.cli run "$scen" --results "$out/results" > "$out/interrupt.run.txt" 2>&1 &
pid=$!
for ((i = 0; i < after; i++)); do
  mask=$(grep SigCgt "/proc/$pid/status" 2>/dev/null | awk '{print $2}')
  [ -z "$mask" ] && break
  term=$(( (16#$mask >> 14) & 1 )); int=$(( (16#$mask >> 1) & 1 ))
  echo "t=${i}s SigCgt=$mask SIGTERM_caught=$term SIGINT_caught=$int" >> "$out/interrupt.mask.txt"
  sleep 1
done
start=$(date +%s.%N)
kill -TERM "$pid" 2>/dev/null
wait "$pid"
rc=$?
echo "exit $rc, $(echo "$(date +%s.%N) - $start" | bc) s after SIGTERM" | tee "$out/interrupt.summary.txt"
run=$(ls -td "$out"/results/*/ 2>/dev/null | head -1)
[ -n "$run" ] && python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))
short = {k: v for k, v in m.items() if isinstance(v, (str, int, float)) and len(str(v)) < 200}
print("manifest:", json.dumps(short))' "$run/manifest.json" | tee -a "$out/interrupt.summary.txt"
tail -5 "$out/interrupt.run.txt" >> "$out/interrupt.summary.txt"
