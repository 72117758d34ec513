# The fourth call: where the placed FP8 tile's warps stall, instruction by instruction (Nsight
# Compute's warp-state sampling by PC, the SourceCounters section), fc1 and fc2 at 64 tokens.
set -u
export PYTHONPATH=$PWD:$PWD/tools
for k in 4 5; do
  timeout 150 ncu --clock-control none -k regex:_grouped_dot --launch-skip $k --launch-count 1 \
    --section SourceCounters --section WarpStateStats -o /tmp/src$k python3 tools/ncu_kernels.py grouped-placed \
    > $OUT/ncu_run$k.txt 2>&1; echo "ncu $k rc=$?"
  ncu -i /tmp/src$k.ncu-rep --page source --print-source sass --csv 2> $OUT/src$k.err | gzip > $OUT/src$k.csv.gz
  echo "src $k: $(zcat $OUT/src$k.csv.gz | wc -l) lines"
  ncu -i /tmp/src$k.ncu-rep --page details > $OUT/details$k.txt 2>&1
done
zcat $OUT/src4.csv.gz | head -3 | cut -c1-600
