#!/usr/bin/env bash
# Run scenarios on the GPU machine from a source tree (no install: the image has the packages).
# Usage: tools/gpu_run.sh OUTDIR scenario.yaml[:extra run args] ...
# Leaves OUTDIR/summary.txt (exit code and wall time per scenario) and OUTDIR/gpu_run.tgz (each
# run's log, its `moebench compare --format markdown` report and plots, and the results folders).
# PER_RUN_TIMEOUT (s, default 300) bounds each run; DEADLINE (epoch seconds, optional) bounds them
# all: a run gets at most what is left before it less MARGIN (default 25 s, for its report and the
# archive), and none starts with less than 20 s. Set DEADLINE from the device call's limit_s, so
# that the archive exists before the call is killed.
set -uo pipefail
out=$1; shift
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
# NVLink multicast stays off on the shared machines (device notes).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$out/results" "$out/logs"
summary="$out/summary.txt"
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name(0))' | tee -a "$summary"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee -a "$summary"
for spec in "$@"; do
  s=${spec%%:*}
  extra=""
  [ "$spec" != "$s" ] && extra=${spec#*:}
  name=$(basename "$s" .yaml)${extra:+-$(echo "$extra" | tr -c 'A-Za-z0-9' '_')}
  before=$(ls "$out/results" | wc -l)
  start=$(date +%s)
  limit=${PER_RUN_TIMEOUT:-300}
  if [ -n "${DEADLINE:-}" ]; then
    left=$(( DEADLINE - start - ${MARGIN:-25} ))
    [ "$left" -lt "$limit" ] && limit=$left
    if [ "$limit" -lt 20 ]; then
      echo "$name: not run, $left s left before DEADLINE" | tee -a "$summary"
      continue
    fi
  fi
  # shellcheck disable=SC2086
  timeout "$limit" python3 -m moebench.cli run "$s" --results "$out/results" $extra \
    > "$out/logs/$name.run.txt" 2>&1
  rc=$?
  echo "$name: exit $rc after $(( $(date +%s) - start )) s (limit $limit s)" | tee -a "$summary"
  run=$(ls -td "$out"/results/*/ 2>/dev/null | head -1)  # the newest run folder is this one
  if [ "$(ls "$out/results" | wc -l)" -gt "$before" ]; then
    python3 -m moebench.cli compare "$run" --format markdown --plot "$out/logs/plots-$name" \
      > "$out/logs/$name.md" 2>&1
  fi
done
tar -czf "$out/gpu_run.tgz" -C "$out" logs results && rm -rf "$out/results" "$out/logs"
