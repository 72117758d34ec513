set -u
export DEADLINE=$(( $(date +%s) + 560 )) PER_RUN_TIMEOUT=330
bash tools/gpu_run.sh /tmp/g scenarios/gpt-oss-20b-decode-grouped.yaml > $OUT/gpu_run.log 2>&1
cp /tmp/g/gpu_run.tgz $OUT/ 2>/dev/null; cat /tmp/g/summary.txt
export PYTHONPATH=$PWD:$PWD/tools
for pr in w8a16 w4a16; do
  left=$(( DEADLINE - $(date +%s) - 10 )); [ $left -lt 30 ] && break
  timeout $left python3 tools/bench_grouped_decode.py /tmp/cs_$pr --precision $pr --tokens 1,32,64 --seeds 0,1,2 --rank 0,1 \
    --variants "dot:-:-:-:-:-:-:-:-:-:-:-:-" --variant-tokens 64 > $OUT/copy_share_$pr.log 2>&1
  echo "$pr rc=$?"; grep -v "^precision=" $OUT/copy_share_$pr.log | tail -14
done
