# Call 5 (2026-12-02, eighth session): the A/B as the arms run: the committed kernel on the
# problem's unpadded scales (old:u) against the working tree's on padded ones (pkg: words), with
# the working tree's byte path on unpadded scales (pkg:u) and the committed kernel on padded ones.
S=docs/perf/2026-12-02-low-counts/scratch
for s in 0 1; do
  SEED=$s KINDS=old:u,pkg,pkg:u,old TOKENS=64,32,16,8,4 PYTHONPATH=$PWD:$S timeout 150 python3 $S/ab_scales.py > $OUT/ab_arm_seed$s.log 2>&1
done
grep -h "median\|equal\|local slots\|rror" $OUT/ab_arm_seed*.log
