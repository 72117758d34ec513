# With the expert-by-expert wait the default wherever it was measured faster (FP8 from 4 tokens,
# MXFP4's one-pass tile): the whole gated scenario, then the whole-grid wait as a variant (ready 0)
# against the new defaults: FP8 at 4 and 8 tokens, MXFP4 at 16, 32 and 64 (two draws, both ranks).
set -u
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
DEADLINE=$(( $(date +%s) + 290 )) PER_RUN_TIMEOUT=280 bash tools/gpu_run.sh /tmp/g scenarios/gpt-oss-20b-decode-grouped.yaml > $OUT/gpu_run.log 2>&1
echo "gated rc=$?"; tail -2 $OUT/gpu_run.log; cp /tmp/g/gpu_run.tgz /tmp/g/summary.txt $OUT/
W="dot:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:0"
timeout 80 python3 tools/bench_grouped_decode.py /tmp/mx --precision w4a16 --tokens 16,32,64 --seeds 0,1 --rank 0,1 \
  --variants "$W" --variant-tokens 16,32,64 > $OUT/whole_mxfp4.log 2>&1; echo "mxfp4 rc=$?"
grep -A12 "^slowest of ranks" $OUT/whole_mxfp4.log | head -12
timeout 70 python3 tools/bench_grouped_decode.py /tmp/lp --precision w8a16 --tokens 4,8 --seeds 0,1 --rank 0,1 \
  --variants "$W" --variant-tokens 4,8 > $OUT/whole_loop.log 2>&1; echo "loop rc=$?"
grep -A12 "^slowest of ranks" $OUT/whole_loop.log | head -12
for f in $OUT/*.log; do echo "$f: $(grep -c 'ok=True sentinels=pass' $f) rows pass, $(grep -c 'ok=False\|sentinels=fail' $f) fail"; done
