# First call (twenty-fourth session): the local-first GEMV's tests compiled on the GPU, then the
# sparse step A/B (arm against local_first) in both formats at 1, 2 and 4 tokens, four draws,
# both ranks. About 6 minutes.
set -u
export PYTHONPATH=$PWD:$PWD/tools
S=docs/perf/2026-12-06-one-token/scratch
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 100 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_decode_kernels.py -m "slow or not slow" -k "local_first or local-first" > $OUT/gpu_local_first_tests.txt 2>&1
echo "gpu tests rc=$?"; tail -2 $OUT/gpu_local_first_tests.txt
for pr in w8a16 w4a16; do
  timeout 230 python3 $S/local_bench.py --precision $pr > $OUT/local_$pr.log 2>&1; echo "$pr rc=$?"
  grep -A12 "^slowest rank" $OUT/local_$pr.log
done
