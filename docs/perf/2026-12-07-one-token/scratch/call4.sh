# The thirty-eighth session's fourth call, with what device time was left (about 290 s, a fresh
# start): the combine folded into fc2 (`sparse_gemv(combine=...)`, `gemv_combine`) on a GPU for
# the first time: its kernel tests (the fence and the counters under real concurrency), then the
# sparse step with the fold against the arm's, FP8 then MXFP4 at one token, four draws, both
# ranks (scratch/fold_bench.py). About 200 s:
#   bash docs/perf/2026-12-07-one-token/scratch/call4.sh
set -u
export PYTHONPATH=$PWD:$PWD/tools
S=docs/perf/2026-12-07-one-token/scratch
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
env -u TRITON_INTERPRET timeout 90 python3 -m pytest -p no:cacheprovider -q -rfE -n 8 \
  tests/kernels/test_gemv_combine.py > $OUT/tests.txt 2>&1
echo "tests rc=$?"; tail -3 $OUT/tests.txt
timeout 50 python3 $S/fold_bench.py --tokens 1 --precision w8a16 > $OUT/fold_fp8.log 2>&1
echo "fp8 rc=$?"; grep -A6 "slowest rank" $OUT/fold_fp8.log; grep -c "bitwise=True" $OUT/fold_fp8.log
timeout 45 python3 $S/fold_bench.py --tokens 1 --precision w4a16 > $OUT/fold_mxfp4.log 2>&1
echo "mxfp4 rc=$?"; grep -A6 "slowest rank" $OUT/fold_mxfp4.log; grep -c "bitwise=True" $OUT/fold_mxfp4.log
