# Prepared for the next session, not run: the MXFP4 grouped tile's kernel tests on the GPU with
# `mxfp4_layout_case`'s sums now exact (scale bytes 120-128; two tests failed on inexact data in
# call 1), then the gated scenario on the arm as it stands (the scale pair as one multiply,
# 4a21460, through every gate for the first time). About 400 s:
#   CALL_END=$(( $(date +%s) + 400 )) bash docs/perf/2026-12-07-stream-k/scratch/next_call.sh
set -u
export PYTHONPATH=$PWD:$PWD/tools
CALL_END=${CALL_END:-$(( $(date +%s) + 400 ))}
left() { echo $(( CALL_END - $(date +%s) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 140 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_grouped_decode.py \
  tests/kernels/test_mx_decode_ptx.py -k "mxfp4 or mx or persistent or stream_k or split" \
  > $OUT/gpu_tests_mxfp4.txt 2>&1
echo "tests rc=$?"; tail -5 $OUT/gpu_tests_mxfp4.txt
if [ $(left) -gt 200 ]; then
  RUN=$(( $(left) - 15 ))
  DEADLINE=$(( $(date +%s) + RUN )) PER_RUN_TIMEOUT=$(( RUN - 5 )) bash tools/gpu_run.sh /tmp/g \
    scenarios/gpt-oss-20b-decode-grouped.yaml > $OUT/gpu_run.log 2>&1
  echo "gated rc=$?"; tail -3 $OUT/gpu_run.log; cp /tmp/g/summary.txt /tmp/g/gpu_run.tgz $OUT/
else
  echo "gated: $(left) s left in this call, not run"
fi
