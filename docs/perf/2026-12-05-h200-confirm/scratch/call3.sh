# The third call: what the combine costs inside the decode steps (scratch/combine_cost.py).
set -u
D=docs/perf/2026-12-05-h200-confirm/scratch
export PYTHONPATH=$PWD:$PWD/tools
timeout 200 python3 $D/combine_cost.py --tokens 1,2,4 > $OUT/combine_fp8.log 2>&1; echo "fp8 rc=$?"
timeout 150 python3 $D/combine_cost.py --tokens 1,2,4 --precision w4a16 > $OUT/combine_mxfp4.log 2>&1; echo "mxfp4 rc=$?"
timeout 150 python3 $D/combine_cost.py --arm grouped_decode --tokens 8,32,64 --seeds 0,1,2 > $OUT/combine_grouped.log 2>&1; echo "grouped rc=$?"
for f in combine_fp8 combine_mxfp4 combine_grouped; do echo "== $f"; sed -n '/slower rank/,$p' $OUT/$f.log; tail -3 $OUT/$f.log | grep -i error; done
