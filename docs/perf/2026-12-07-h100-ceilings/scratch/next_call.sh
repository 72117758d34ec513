# Prepared for the next session, not run: the model regime on the H100 SXM's own ceilings (its
# TPOT floors now reported on this card; the sixth call ran out of time before smoke-model), then
# the MXFP4-heavy whole model. About 300 s:
#   CALL_END=$(( $(date +%s) + 300 )) bash docs/perf/2026-12-07-h100-ceilings/scratch/next_call.sh
set -u
export PYTHONPATH=$PWD:$PWD/tools
CALL_END=${CALL_END:-$(( $(date +%s) + 300 ))}
RUN=$(( CALL_END - $(date +%s) - 25 ))
DEADLINE=$(( $(date +%s) + RUN )) PER_RUN_TIMEOUT=200 bash tools/gpu_run.sh /tmp/g \
  scenarios/smoke-model.yaml scenarios/qwen3-30b-a3b-model.yaml > $OUT/gpu_run.log 2>&1
echo "runs rc=$?"; cat /tmp/g/summary.txt; cp /tmp/g/summary.txt $OUT/
mkdir -p /tmp/x && tar xzf /tmp/g/gpu_run.tgz -C /tmp/x && cp /tmp/x/logs/*.md $OUT/
grep -h -A12 "TPOT" /tmp/x/logs/*.md | grep -i "floor" | head -12
