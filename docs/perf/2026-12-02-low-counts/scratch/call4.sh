# Call 4 (2026-12-02, eighth session): call 3's A/B again, its harness fixed (the committed and
# the probe kernels take no SCALE_WORDS).
S=docs/perf/2026-12-02-low-counts/scratch
for s in 0 1; do
  SEED=$s KINDS=old,pkg,a4,a-1,a1 TOKENS=64,32,16,8,4 PYTHONPATH=$PWD:$S timeout 150 python3 $S/ab_scales.py > $OUT/ab_scales_seed$s.log 2>&1
done
grep -h "median\|equal\|local slots\|rror" $OUT/ab_scales_seed*.log
