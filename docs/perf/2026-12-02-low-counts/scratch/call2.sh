# Call 2 (2026-12-02, eighth session): the MXFP4 tile's scales as words (A/B, two routing draws),
# the bench on the working tree, the grouped kernel tests compiled on the GPU.
S=docs/perf/2026-12-02-low-counts/scratch
for s in 0 1; do
  SEED=$s KINDS=old,pkg,a4,a-1,a1 TOKENS=64,32,16,8,4 PYTHONPATH=$PWD:$S python3 $S/ab_scales.py > $OUT/ab_scales_seed$s.log 2>&1
done
grep -h "median\|equal\|local slots\|rror" $OUT/ab_scales_seed*.log
PYTHONPATH=$PWD python3 tools/bench_grouped_decode.py $OUT/bench --tokens 1,2,4,8,16,32,64 --floor 1,64 > $OUT/bench_grouped_decode.log 2>&1
tail -32 $OUT/bench_grouped_decode.log
env -u TRITON_INTERPRET timeout 200 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_grouped_decode.py > $OUT/gpu_grouped_kernel_tests.txt 2>&1
tail -3 $OUT/gpu_grouped_kernel_tests.txt
