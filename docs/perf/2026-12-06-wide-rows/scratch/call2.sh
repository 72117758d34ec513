# Nsight Compute on fc1 alone: the arm's launch against 128 rows a program (ncu_wide.py), the
# memory sections (DRAM and L2 throughput, L2 hit rate, the L1/L2 traffic).
set -u
export PYTHONPATH=$PWD:$PWD/tools
S=docs/perf/2026-12-06-wide-rows/scratch
for v in arm wide; do
  timeout 200 ncu --clock-control none -k regex:_grouped_dot --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
    --section Occupancy --section LaunchStats python3 $S/ncu_wide.py $v > $OUT/ncu_$v.txt 2>&1
  echo "$v rc=$?"; grep -E "Duration|DRAM Throughput|L2 Cache Throughput|L2 Hit Rate|Memory Throughput|Achieved Occupancy|Registers Per" $OUT/ncu_$v.txt
done
