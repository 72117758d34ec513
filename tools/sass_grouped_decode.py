"""The grouped decode kernels compiled for sm_90a without a GPU: registers, shared memory, the
programs an SM holds at once, spills (stack bytes, local loads and stores), and the instructions
their weight loop spends per weight byte.

Compiles `_grouped_gemv_*` and `_grouped_dot_*` (moebench/kernels/grouped_gemv.py, grouped_dot.py)
at gpt-oss-20b's shapes (D = F = 2,880, 16 local experts, top-4) for the launches given, with the
divisibility hints a launch gives, and the sparse GEMV's default launches beside them for
comparison; finds the weight loop in the SASS (the innermost loop with the multiply-adds or tensor
core instructions) and divides its instructions by the weight bytes a thread streams per iteration.
Needs the GPU's triton (3.6) in the environment, e.g. a venv with `pip install triton==3.6.0
torch==2.13.0`; no GPU, no device time. The launcher's own checks are not run here.

Usage: PYTHONPATH=$PWD python tools/sass_grouped_decode.py OUT [SPEC ...]
SPEC: path:fmt:block_m:block_n:block_k:warps:stages:tokens
[:weights[:maxnreg[:passes[:words[:fold[:early[:rotated[:placed[:packed[:prefetch[:ahead[:ready
[:dot[:split[:stream[:slots]]]]]]]]]]]]]]]]
(block_k in values; weights ``tma`` or ``ptr``, the FP8 tile's, default tma; maxnreg 0 for none,
default the tile's cap; passes 1 for the tile's one pass a program, `Launch.pass_grid`, default 0;
words 1 or 0: the MXFP4 tile's scales read as 32-bit words from rows padded to 96 bytes, as the arm
builds them, `grouped_gemv.word_aligned_scales`, or as bytes from unpadded rows; default 1 where a
step is whole words; fold 1 or 0: the MXFP4 tile's decode with its scales folded, for scale bytes up
to 128, `grouped_dot` FOLD_SCALES, or not, 2: folded with the bytes biased (rotated only,
`Launch.mx_biased_scales`); default 1; early 1 or 0: the bias loaded before the K
loop, `Launch.early_bias`, default 0; rotated 1 or 0: the MXFP4 tile's weights in `mx_rotated`'s
layout, `Launch.mx_rotated` (the GEMV's too), default 0; placed 1 or 0: the FP8 tile's weights in
`fp8_placed`'s layout, `Launch.fp8_placed`, default 0; packed 1 or 0: the FP8 tile's weights through
TMA in `tile_packed`'s order, `Launch.fp8_packed`, or the MXFP4 tile's bytes, `Launch.mx_packed`, 2
the MXFP4 tile's scale bytes too, `Launch.mx_packed_scales`, default 0; prefetch: the packed
program's first boxes asked of the L2 before the wait, `Launch.fp8_prefetch`, default 0; ahead: each
step's L2 prefetch that many steps on, `Launch.fp8_prefetch_ahead`, default 0; ready 1: fc1
signalling and fc2 waiting expert by expert, `Launch.expert_ready`, compiled with the dependent
launch, default 0; dot 1: the MXFP4 tile's bytes in `mx_dot_order`'s layout, `Launch.mx_dot_order`,
default 0; split: fc2's K steps over that many programs a row block, `Launch.split_k`, default
1; stream: both stages on the persistent grid of that many programs an SM, `Launch.stream_k`,
compiled with the dependent launch, default 0; slots 1: the GEMV's grid led by slots,
`Launch.slot_grid`, default 0; the GEMV is compiled with the dependent launch, as the arm
launches it), e.g. dot:fp8:16:64:128:4:4:64:ptr:0; the default
list is the arm's fc1 launches at 1, 8 and 64 tokens, from `grouped_launch` as it stands
(`arm_specs`).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from moebench.kernels import grouped_dot, grouped_gemv, sparse_gemv, sparse_launch
from moebench.kernels import stream_k as stream_k_kernels
from moebench.kernels.grouped_launch import (
    TILE_MAX_REGISTERS,
    Launch,
    default_launch,
    paired_launches,
)
from moebench.kernels.grouped_slots import scan_width

D = F = 2880
E, TOP_K = 16, 4
BIN = os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin")


def launch_spec(L: Launch, fmt: str, tokens: int) -> str:
    """The SPEC (module docstring) of launch ``L`` at ``tokens``, every field spelled out, as the
    arm builds it: scales read as words where a step is whole words, folded (random weights'
    scale bytes are below 129), biased where the launch says so."""
    words = int(fmt == "mxfp4" and L.block_k % 128 == 0)
    packed = 2 if L.mx_packed_scales else int(L.fp8_packed or L.mx_packed)
    fields = (L.path, fmt, L.block_m, L.block_n, L.block_k, L.num_warps, L.num_stages, tokens,
              "tma" if L.tma else "ptr", L.max_registers, int(L.pass_grid), words,
              2 if L.mx_biased_scales else 1, int(L.early_bias), int(L.mx_rotated),
              int(L.fp8_placed), packed, L.fp8_prefetch, L.fp8_prefetch_ahead,
              int(bool(L.expert_ready)), int(L.mx_dot_order), L.split_k,
              L.stream_k, int(L.slot_grid))  # fmt: skip
    return ":".join(map(str, fields))


def arm_specs(tokens: tuple[int, ...] = (1, 8, 64)) -> list[str]:
    """The arm's fc1 launches (`grouped_launch.default_launch` and `paired_launches`, with the
    dependent launch, as `grouped_decode.launches` gives them) at ``tokens``, both formats."""
    specs = []
    for fmt in ("fp8", "mxfp4"):
        for t in tokens:
            shape = dict(tokens=t, top_k=TOP_K, experts=E, pdl=True)
            fc1 = default_launch(fmt, columns=2 * F, reduction=D, **shape)
            fc2 = default_launch(fmt, columns=D, reduction=F, **shape)
            fc1, _ = paired_launches(fc1, fc2, fmt, slots_per_expert=t * TOP_K / E)
            specs.append(launch_spec(fc1, fmt, t))
    return specs


def values(stage: str, tokens: int) -> dict:
    """The integer arguments of a launch at gpt-oss-20b's shapes."""
    N, R = (2 * F, D) if stage == "fc1" else (D, F)
    n_out = N // 2 if stage == "fc1" else N
    x_t, x_k = (R, 0) if stage == "fc1" else (TOP_K * R, R)
    return dict(TK=tokens * TOP_K, K=TOP_K, expert_offset=0, E=E, R=R, stride_xt=x_t,
                stride_xk=x_k, stride_it=TOP_K, stride_ik=1, stride_we=N * R, stride_wn=R,
                stride_se=N * R // 32, stride_sn=R // 32, stride_be=N, stride_ot=TOP_K * n_out,
                stride_ok=n_out, stride_pt=0, stride_pk=0, N=N, K_SPLIT=R, stride_cwt=TOP_K,
                stride_cwk=1, stride_yt=D)  # fmt: skip


def build(fn, fmt: str, consts: dict, ints: dict, warps: int, stages: int, maxnreg: int = 0,
          box: tuple[int, ...] | None = None, more_pointers: dict | None = None):  # fmt: skip
    """``fn`` specialised as a launch would be: 16-byte aligned pointers, integers divisible by
    16 marked so, integers equal to 1 folded in; with ``box`` the weights a TMA descriptor of
    that block; ``maxnreg`` a register cap (0: none); ``more_pointers`` the types of pointer
    arguments other than the GEMVs' (name: triton type, e.g. "*i32")."""
    pointers = (more_pointers or {}) | {
                "x_ptr": "*bf16", "ids_ptr": "*i32", "b_ptr": "*bf16", "out_ptr": "*bf16",
                "part_ptr": "*fp32", "w_ptr": "*fp8e4nv" if fmt == "fp8" else "*u8",
                "w": "*fp8e4nv" if fmt == "fp8" else "*u8", "w_bytes": "*fp8e4nv",
                "ready_ptr": "*i32", "split_ptr": "*fp32", "count_ptr": "*i32",
                "cw_ptr": "*fp32", "y_ptr": "*bf16", "cnt_ptr": "*i32",
                "ws_ptr": "*fp32" if fmt == "fp8" else "*u8"}  # fmt: skip
    sig, attrs, cx = {}, {}, {}
    for i, name in enumerate(fn.arg_names):
        if name in consts:
            sig[name], cx[name] = "constexpr", consts[name]
        elif name == "w" and box:
            sig[name] = f"tensordesc<fp8e4nv[{', '.join(map(str, box))}]>"
        elif name in pointers:
            sig[name], attrs[(i,)] = pointers[name], [["tt.divisibility", 16]]
        elif ints[name] == 1:
            sig[name], cx[name] = "constexpr", 1
        else:
            sig[name] = "i32"
            if ints[name] % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
    options = dict(
        num_warps=warps, num_stages=stages or 3, **({"maxnreg": maxnreg} if maxnreg else {})
    )
    return triton.compile(ASTSource(fn, sig, cx, attrs), target=GPUTarget("cuda", 90, 32),
                          options=options)  # fmt: skip


def weight_loop_body(sass: str) -> list[str]:
    """The instructions of the innermost loop that holds the multiply-adds (FFMA) or tensor-core
    instructions (HGMMA, HMMA): the weight loop (the longest such loop; none: empty)."""
    lines = sass.splitlines()
    at, label_at, pending = [], {}, None
    for ln in lines:
        m = re.match(r"\s*\.(L_x_\d+):", ln)
        if m:
            pending = m.group(1)
            continue
        m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?);", ln)
        if m:
            addr = int(m.group(1), 16)
            at.append((addr, m.group(2)))
            if pending:
                label_at[pending], pending = addr, None
    loops = []
    for addr, text in at:
        m = re.search(r"BRA.*`\(\.(L_x_\d+)\)", text)
        if m and label_at.get(m.group(1), addr + 1) < addr:
            loops.append((label_at[m.group(1)], addr))
    inner = [(lo, hi) for lo, hi in loops
             if not any(lo <= a < b <= hi and (a, b) != (lo, hi) for a, b in loops)]  # fmt: skip
    bodies = [[t for a, t in at if lo <= a <= hi] for lo, hi in inner]
    math = [b for b in bodies if any(re.search(r"FFMA|HGMMA|HMMA", t) for t in b)]
    return max(math, key=len, default=[])


def weight_loop(sass: str) -> int:
    """The weight loop's instruction count (`weight_loop_body`)."""
    return len(weight_loop_body(sass))


def report(name: str, kernel, out: str, bytes_per_thread: float, warps: int) -> None:
    cubin = os.path.join(out, f"{name}.cubin")
    with open(cubin, "wb") as f:
        f.write(kernel.asm["cubin"])
    sass = subprocess.run([f"{BIN}/nvdisasm", "-c", cubin], capture_output=True, text=True).stdout
    with open(os.path.join(out, f"{name}.sass"), "w") as f:
        f.write(sass)
    res = subprocess.run([f"{BIN}/cuobjdump", "-res-usage", cubin], capture_output=True,
                         text=True).stdout  # fmt: skip
    regs = int(re.search(r"REG:(\d+)", res).group(1))
    stack = int(re.search(r"STACK:(\d+)", res).group(1))
    spills = len(re.findall(r"\b(?:LDL|STL)\b", sass))
    loop = weight_loop(sass)
    before, loads = prologue(sass)
    print(f"{name}: {regs} registers, {kernel.metadata.shared} B shared, "
          f"{resident(regs, kernel.metadata.shared, warps)} programs an SM, stack {stack} B, "
          f"{spills} local loads/stores; weight loop {loop} instructions for "
          f"{bytes_per_thread:g} weight bytes a thread: {loop / bytes_per_thread:.1f} a byte; "
          f"{before} instructions and {loads} global loads before the loop",
          flush=True)  # fmt: skip


def prologue(sass: str) -> tuple[int, int]:
    """(instructions, global loads) in program order before the weight loop's first
    instruction (`weight_loop_body`): what a program runs before it streams weights."""
    body = weight_loop_body(sass)
    at = [m.group(1) for m in re.finditer(r"\s+/\*[0-9a-f]{4,}\*/\s+(.*?);", sass)]
    if not body or body[0] not in at:
        return 0, 0
    head = at[: at.index(body[0])]
    return len(head), sum(bool(re.search(r"\bLDG\b|\bLDG\.", t)) for t in head)


def resident(regs: int, shared: int, warps: int) -> int:
    """Programs an sm_90 SM holds at once: 64K registers (allocated 8 a thread at a time), 228 KB
    of shared memory (1 KB reserved a program), 64 warps, 32 programs."""
    by_regs = 65536 // (-(-regs // 8) * 8 * 32 * warps)
    by_shared = 233472 // (shared + 1024)
    return min(by_regs, by_shared, 64 // warps, 32)


def grouped(spec: str, out: str) -> None:
    path, fmt, bm, bn, bk, nw, ns, tokens, *rest = spec.split(":")
    bm, bn, bk, nw, ns, tokens = map(int, (bm, bn, bk, nw, ns, tokens))
    # The tile's defaults (grouped_launch.path_launch): FP8 through TMA, 128 registers at most.
    tma = path == "dot" and fmt == "fp8" and (rest[0] if rest else "tma") == "tma"
    maxnreg = int(rest[1]) if len(rest) > 1 else TILE_MAX_REGISTERS if path == "dot" else 0
    passes = len(rest) > 2 and rest[2] == "1"
    words = (rest[3] == "1" if len(rest) > 3 else True) and fmt == "mxfp4" and bk % 128 == 0
    # 2: folded with biased scale bytes (`mx_rotated.biased_scales`, ``Launch.mx_biased_scales``).
    fold = (
        {"0": False, "1": True, "2": 2}[rest[4] if len(rest) > 4 else "1"]
        if fmt == "mxfp4"
        else False
    )
    early = len(rest) > 5 and rest[5] == "1"
    rotated = len(rest) > 6 and rest[6] == "1"
    placed = len(rest) > 7 and rest[7] == "1"
    packed = len(rest) > 8 and rest[8] in ("1", "2")
    packed_scales = len(rest) > 8 and rest[8] == "2" and fmt == "mxfp4"
    prefetch = int(rest[9]) if len(rest) > 9 else 0
    ahead = int(rest[10]) if len(rest) > 10 else 0
    ready = len(rest) > 11 and rest[11] == "1"
    dot_order = len(rest) > 12 and rest[12] == "1" and fmt == "mxfp4"
    split_k = int(rest[13]) if len(rest) > 13 else 1  # fc2's (a stage with no GLU)
    stream_k = int(rest[14]) if len(rest) > 14 else 0  # both stages'
    slot_grid = len(rest) > 15 and rest[15] == "1"
    for stage, glu in (("fc1", "swiglu_oai"), ("fc2", "none")):
        ints = values(stage, tokens)
        # The arm's padded scale rows (grouped_gemv.word_aligned_scales), or packed ones.
        if words and not packed_scales:
            ints.update(stride_sn=96, stride_se=ints["N"] * 96)
        scan = scan_width(tokens * TOP_K, E, bm)
        c = dict(GLU=glu, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, EVEN_K=ints["R"] % bk == 0,
                 EXACT_RNE=False, BLOCK_E=E, SCAN=scan, GDC=ready, EARLY_BIAS=early)  # fmt: skip
        if path == "dot":
            fn = grouped_dot._grouped_dot_fp8 if fmt == "fp8" else grouped_dot._grouped_dot_mxfp4
            if stream_k:  # the persistent grid (`stream_k`), compiled with the dependent launch
                fn = stream_k_kernels._grouped_dot_mxfp4_stream
                ints.update(NB=ints["N"] // bn)
                c.update(GDC=True)
            c.update(NUM_STAGES=ns, **({"INTERPRET": False} if "INTERPRET" in fn.arg_names else {}))
            c.update({"TMA": tma} if "TMA" in fn.arg_names else {})
            c.update({"PASS_GRID": passes} if "PASS_GRID" in fn.arg_names else {})
            c.update({"SCALE_WORDS": words} if "SCALE_WORDS" in fn.arg_names else {})
            c.update({"FOLD_SCALES": fold} if "FOLD_SCALES" in fn.arg_names else {})
            c.update({"ROTATED": rotated} if "ROTATED" in fn.arg_names else {})
            c.update({"PLACED": placed} if "PLACED" in fn.arg_names else {})
            c.update({"PACKED": packed} if "PACKED" in fn.arg_names else {})
            c.update({"PACKED_SCALES": packed_scales} if "PACKED_SCALES" in fn.arg_names else {})
            if "DOT_ORDER" in fn.arg_names:
                c.update(DOT_ORDER=dot_order, TAIL_K=ints["R"] % bk)
            c.update({"PREFETCH": prefetch} if "PREFETCH" in fn.arg_names else {})
            c.update({"AHEAD": ahead} if "AHEAD" in fn.arg_names else {})
            if "SPLIT_K" in fn.arg_names:
                c.update(SPLIT_K=split_k if stage == "fc2" else 1)
            role = (1 if stage == "fc1" else 2) if ready else 0
            c.update({"READY": role} if "READY" in fn.arg_names else {})
            # A block_n not dividing N: the tile's ragged rows (a 3-D descriptor, `grouped_gemv`).
            ragged = tma and ints["N"] % bn != 0
            c.update({"RAGGED": ragged} if "RAGGED" in fn.arg_names else {})
        else:
            fn = (
                grouped_gemv._grouped_gemv_fp8 if fmt == "fp8" else grouped_gemv._grouped_gemv_mxfp4
            )
            c.update({"PTX": True, "ROTATED": rotated} if fmt == "mxfp4" else {})
            c.update(SLOT_GRID=slot_grid, GDC=True)  # the arm's GEMV takes the dependent launch
        per_byte = 2 if fmt == "mxfp4" else 1
        box = ((1, bn, bk) if c.get("RAGGED") else (bn, bk)) if tma else None
        kernel = build(fn, fmt, c, ints, nw, ns, maxnreg, box)
        report(f"grouped_{spec.replace(':', '_')}_{stage}", kernel, out,
               bn * bk / per_byte / (32 * nw), nw)  # fmt: skip


def sparse(fmt: str, out: str, early_loads: bool, rotated: bool = False,
           stage: str = "fc1", fold: bool = False) -> None:  # fmt: skip
    """The sparse GEMV's default ``stage`` launch at one token (fc1 unless said), its bias (and
    FP8 scale) loaded after the K loop or, with ``early_loads``, before it
    (`sparse_gemv(early_loads=...)`); MXFP4 with ``rotated`` its weights in `mx_rotated`'s layout
    (`sparse_gemv(mx_rotated=True)`); fc2 with ``fold`` the combine folded in
    (`sparse_gemv(combine=...)`, `gemv_combine`)."""
    bn, bk, nw = sparse_launch.default_blocks(fmt)
    ints = values(stage, 1)
    glu = "swiglu_oai" if stage == "fc1" else "none"
    c = dict(GLU=glu, BLOCK_N=bn, BLOCK_K=bk, EVEN_K=ints["R"] % bk == 0,
             EXACT_RNE=False, NUM_STAGES=0, SPLIT_K=1, GDC=False, TRIGGER="start",
             EARLY_LOADS=early_loads, LOCAL_FIRST=0, COMBINE_K=0, Y_BF16=True)  # fmt: skip
    if fmt == "fp8":
        fn, c["PEEL"] = sparse_gemv._sparse_gemv_fp8, False
        c["TOKEN_ONCE"] = bn >= sparse_launch.FP8_TOKEN_ONCE_FROM_ROWS
        c["WHOLE_STEPS"] = bn >= sparse_launch.FP8_WHOLE_STEPS_FROM_ROWS
        c.update(QUADS=False, PTX=True)
    else:
        fn = sparse_gemv._sparse_gemv_mxfp4
        c.update(GROUP_MAJOR=True, PTX=True, TOKEN_LOAD=0, ROTATED=rotated)
    per_byte = 2 if fmt == "mxfp4" else 1
    if fold:
        c.update(COMBINE_K=TOP_K, Y_BF16=True)
    name = (f"sparse_{fmt}_{stage}" + ("_early" if early_loads else "")
            + ("_rotated" if rotated else "") + ("_fold" if fold else ""))  # fmt: skip
    report(name, build(fn, fmt, c, ints, nw, 0), out, bn * bk / per_byte / (32 * nw), nw)


def main(out: str, specs: list[str]) -> None:
    os.makedirs(out, exist_ok=True)
    print(f"triton {triton.__version__}, sm_90a, gpt-oss-20b shapes")
    for fmt in ("fp8", "mxfp4"):
        for early_loads in (False, True):
            sparse(fmt, out, early_loads)
    sparse("mxfp4", out, False, rotated=True)
    for fmt in ("fp8", "mxfp4"):
        for fold in (False, True):
            sparse(fmt, out, False, rotated=fmt == "mxfp4", stage="fc2", fold=fold)
    for spec in specs:
        grouped(spec, out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:] or arm_specs())
