# Third call: MXFP4's tile reads packed bytes by default in both forms now (one pass a program and
# the expert loop; grouped_launch.MX_PACKED after calls 1 and 2). The copy shares at 32 and 64
# tokens (two draws, both ranks); then the whole gated scenario on this tree. (The GPU run of the
# packed kernel tests was dropped: failed starts left too little device time.)
set -u
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 60 python3 tools/bench_grouped_decode.py /tmp/cs --precision w4a16 --tokens 32,64 --seeds 0,1 --rank 0,1 \
  > $OUT/copy_share_w4a16.log 2>&1; echo "copy share rc=$?"
grep -A8 "^targets" $OUT/copy_share_w4a16.log | tail -8
DEADLINE=$(( $(date +%s) + 290 )) PER_RUN_TIMEOUT=260 bash tools/gpu_run.sh /tmp/g scenarios/gpt-oss-20b-decode-grouped.yaml > $OUT/gpu_run.log 2>&1
echo "gated rc=$?"; tail -2 $OUT/gpu_run.log; cp /tmp/g/gpu_run.tgz /tmp/g/summary.txt $OUT/
