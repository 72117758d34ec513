# The packed read-only kernel's ceiling at the arm's box (64 rows x 64 bytes, 6 stages, 4 warps)
# beside the natural-row read and the older boxes, on the same machine as call 1.
set -u
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
RSPECS=64:64:6:4,64:64:4:4,64:128:4:4,32:64:6:4 timeout 200 python3 docs/perf/2026-12-02-grouped-stream/scratch/rdp.py > $OUT/rdp.log 2>&1; echo "rdp rc=$?"
cat $OUT/rdp.log
