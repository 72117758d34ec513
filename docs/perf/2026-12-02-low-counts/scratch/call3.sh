# Call 3 (2026-12-02, eighth session), one call for want of machines: the MXFP4 tile's scales as
# words (A/B, two routing draws), the bench and the gated scenario on the working tree, then the
# grouped kernel tests compiled on the GPU in whatever time is left.
S=docs/perf/2026-12-02-low-counts/scratch
T0=$(date +%s)
for s in 0 1; do
  SEED=$s KINDS=old,pkg,a4,a-1,a1 TOKENS=64,32,16,8,4 PYTHONPATH=$PWD:$S timeout 100 python3 $S/ab_scales.py > $OUT/ab_scales_seed$s.log 2>&1
done
grep -h "median\|equal\|local slots\|rror" $OUT/ab_scales_seed*.log
echo "ab done at $(( $(date +%s) - T0 )) s"
PYTHONPATH=$PWD timeout 140 python3 tools/bench_grouped_decode.py $OUT/bench --tokens 1,2,4,8,16,32,64 --floor 1,64 > $OUT/bench_grouped_decode.log 2>&1
tail -32 $OUT/bench_grouped_decode.log
echo "bench done at $(( $(date +%s) - T0 )) s"
DEADLINE=$(( T0 + 500 )) PER_RUN_TIMEOUT=260 bash tools/gpu_run.sh $OUT/run scenarios/gpt-oss-20b-decode-grouped.yaml
echo "run done at $(( $(date +%s) - T0 )) s"
left=$(( T0 + 585 - $(date +%s) ))
[ $left -gt 20 ] && env -u TRITON_INTERPRET timeout $left python3 -m pytest -q -p no:cacheprovider tests/kernels/test_grouped_decode.py > $OUT/gpu_grouped_kernel_tests.txt 2>&1
tail -3 $OUT/gpu_grouped_kernel_tests.txt
echo "all done at $(( $(date +%s) - T0 )) s"
