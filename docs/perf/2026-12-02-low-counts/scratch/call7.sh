# Call 7 (2026-12-02, eighth session): the tile's stage count at 4-16 tokens with the MXFP4 scales
# as words (the pipeline now carries them), both routing draws.
V="-:-:-:-:-:4,-:-:-:-:-:5,-:-:-:-:-:6"
S=docs/perf/2026-12-02-low-counts/scratch
PYTHONPATH=$PWD timeout 150 python3 tools/bench_grouped_decode.py $OUT/seed0 --tokens 4,8,16 --variants="$V" --variant-tokens 4,8,16 > $OUT/bench_seed0.log 2>&1
PYTHONPATH=$PWD timeout 150 python3 tools/bench_grouped_decode.py $OUT/seed1 --tokens 4,8,16 --variants="$V" --variant-tokens 4,8,16 --scenario $S/seed1.yaml > $OUT/bench_seed1.log 2>&1
for f in $OUT/bench_seed0.log $OUT/bench_seed1.log; do grep "^precision" $f | grep -v dense | sed -E 's/precision=(\S+) tokens=(\S+) .*arm=(\S+) variant=(.*) weight_bytes.*step_us=(\S+) .*of_copy=(\S+)( fc1_us=(\S+) fc2_us=(\S+))?/\1 \2 \3 [\4] \5 fc1=\8 fc2=\9/'; done
