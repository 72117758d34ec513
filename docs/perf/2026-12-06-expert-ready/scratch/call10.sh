# tools/ncu_kernels.py's grouped forms after its rewrite (the arm's operands, natural, placed):
# each runs its three launches of fc1 and fc2 to the end (a smoke run; no profiler).
set -u
export PYTHONPATH=$PWD:$PWD/tools
for k in grouped grouped-mxfp4 grouped-natural grouped-placed; do
  timeout 60 python3 tools/ncu_kernels.py $k > $OUT/ncu_$k.log 2>&1; echo "$k rc=$?"; tail -2 $OUT/ncu_$k.log
done
