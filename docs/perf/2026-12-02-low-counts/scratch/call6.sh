# Call 6 (2026-12-02, eighth session): the 4-token launches again with the scale words: stages,
# programmatic dependent launch off, the FP8 tile capped through TMA; two routing draws.
V="-:-:-:-:-:5,-:-:-:-:-:3,-:-:-:-:-:-:0,dot:16:64:128:4:4:-:-:128:1,gemv:1:-:-:-:-:0"
S=docs/perf/2026-12-02-low-counts/scratch
PYTHONPATH=$PWD timeout 120 python3 tools/bench_grouped_decode.py $OUT/seed0 --tokens 2,4,8 --variants="$V" --variant-tokens 2,4,8 > $OUT/bench_seed0.log 2>&1
PYTHONPATH=$PWD timeout 120 python3 tools/bench_grouped_decode.py $OUT/seed1 --tokens 2,4,8 --variants="$V" --variant-tokens 2,4,8 --scenario $S/seed1.yaml > $OUT/bench_seed1.log 2>&1
for f in $OUT/bench_seed0.log $OUT/bench_seed1.log; do grep "^precision" $f | grep -v dense | sed -E 's/precision=(\S+) tokens=(\S+) .*arm=(\S+) variant=(.*) weight_bytes.*step_us=(\S+) .*of_copy=(\S+)( fc1_us=(\S+) fc2_us=(\S+))?/\1 \2 \3 [\4] \5 fc1=\8 fc2=\9/'; done
