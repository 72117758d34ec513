# The seventh call: the GPU tests of the grouped tile, then call2.sh again on the tree with the FP8 one-pass tile on 64-value steps.
set -u
export PYTHONPATH=$PWD:$PWD/tools
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_grouped_decode.py tests/kernels/test_grouped_launch_choice.py tests/arms/test_grouped_decode_arm.py > $OUT/gpu_tests.log 2>&1; echo "gpu tests rc=$?"; tail -1 $OUT/gpu_tests.log
export DEADLINE=$(( $(date +%s) + 420 )) PER_RUN_TIMEOUT=330
bash tools/gpu_run.sh /tmp/g scenarios/gpt-oss-20b-decode-grouped.yaml > $OUT/gpu_run.log 2>&1
cp /tmp/g/gpu_run.tgz $OUT/ 2>/dev/null; cat /tmp/g/summary.txt
export PYTHONPATH=$PWD:$PWD/tools
for pr in w8a16 w4a16; do
  left=$(( DEADLINE - $(date +%s) - 10 )); [ $left -lt 30 ] && break
  timeout $left python3 tools/bench_grouped_decode.py /tmp/cs_$pr --precision $pr --tokens 1,32,64 --seeds 0,1,2 --rank 0,1 \
    --variants "dot:-:-:-:-:-:-:-:-:-:-:-:-" --variant-tokens 64 > $OUT/copy_share_$pr.log 2>&1
  echo "$pr rc=$?"; grep -v "^precision=" $OUT/copy_share_$pr.log | tail -14
done
