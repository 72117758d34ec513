#!/usr/bin/env bash
# Run scenarios on the GPU machine from a source tree (no install: the image has the packages).
# Usage: tools/gpu_run.sh OUTDIR scenario.yaml [scenario.yaml ...]
set -uo pipefail
out=$1; shift
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
mkdir -p "$out/results"
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name(0))'
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
for s in "$@"; do
  name=$(basename "$s" .yaml)
  echo "=== $name"
  start=$(date +%s)
  python3 -m moebench.cli run "$s" --results "$out/results" > "$out/$name.run.txt" 2>&1
  echo "exit $? after $(( $(date +%s) - start )) s"
  tail -5 "$out/$name.run.txt"
  run=$(ls -td "$out"/results/*-"$name"-* 2>/dev/null | head -1)
  [ -n "$run" ] && python3 -m moebench.cli compare "$run" --format markdown > "$out/$name.md" 2>&1
done
tar -czf "$out/results.tgz" -C "$out" results && rm -rf "$out/results"
