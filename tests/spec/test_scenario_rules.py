"""One test per scenario rule: each mutation of a valid document raises a one-line
ScenarioError that names the file and the field path."""

from __future__ import annotations

import pytest
from scenario_support import BASE, doc, fails

# --- one test per rule: (mutation, field path named, fragment of the message) ------------------

RULES = [
    # the five malformed examples of the issue, and their neighbours
    pytest.param(
        doc(model={"hidden": 200}), "model.hidden", "multiple of 128", id="hidden-not-128"
    ),
    pytest.param(
        doc(model={"intermediate": 320}),
        "model.intermediate",
        "multiple of 128",
        id="intermediate-not-128",
    ),
    pytest.param(
        doc(topology={"ep": 3, "dp": 3}),
        "topology.ep",
        "divide model.experts",
        id="experts-not-divisible-by-ep",
    ),
    pytest.param(doc(model={"top_k": 9}), "model.top_k", "<= model.experts", id="top_k-gt-experts"),
    pytest.param(
        doc(shape={"alignment": 100}),
        "shape.alignment",
        "must be a power of two >= 16, got 100",
        id="alignment-not-pow2",
    ),
    pytest.param(
        doc(shape={"alignment": 8}), "shape.alignment", "power of two", id="alignment-below-16"
    ),
    pytest.param(
        doc(shape={"tokens_per_rank": 0}), "shape.tokens_per_rank", "got 0", id="tokens-below-1"
    ),
    pytest.param(
        doc(routing={"family": "trace", "path": "no/such/trace.json"}),
        "routing.path",
        "no/such/trace.json",
        id="nonexistent-trace",
    ),
    pytest.param(
        doc(measure={"blockz": 3}),
        "measure.blockz",
        "unknown key; expected one of regimes",
        id="unknown-key",
    ),
    pytest.param(
        doc(shape={"tokens_per_rank": "8"}),
        "shape.tokens_per_rank",
        "expected an integer, got string",
        id="wrong-type",
    ),
    # model
    pytest.param(doc(model="no-such-model"), "model", "unknown preset", id="preset-unknown-str"),
    pytest.param(
        doc(model={"preset": "nope"}), "model.preset", "unknown preset", id="preset-unknown-map"
    ),
    pytest.param(doc(model={"hiden": 256}), "model.hiden", "unknown key", id="model-unknown-key"),
    pytest.param(
        {**BASE, "model": {"hidden": 256, "intermediate": 256, "experts": 8, "top_k": 2}},
        "model.id",
        "required",
        id="custom-model-needs-id",
    ),
    pytest.param(doc(model={"hidden": True}), "model.hidden", "got boolean", id="bool-is-not-int"),
    pytest.param(doc(model={"hidden": 1 << 20}), "model.hidden", "between", id="hidden-huge"),
    pytest.param(doc(model={"hidden": -128}), "model.hidden", "between", id="hidden-negative"),
    pytest.param(doc(model={"experts": 0}), "model.experts", "between", id="experts-zero"),
    pytest.param(doc(model={"top_k": 0}), "model.top_k", "between", id="top_k-zero"),
    pytest.param(doc(model={"id": ""}), "model.id", "non-empty", id="id-empty"),
    pytest.param(
        doc(model={"revision": 7}), "model.revision", "expected a string", id="revision-type"
    ),
    pytest.param(doc(model=["x"]), "model", "expected a mapping", id="model-list"),
    # topology
    pytest.param(doc(topology={"ep": 2, "dp": 1}), "topology.ep", "dp * tp", id="ep-ne-dp-tp"),
    pytest.param(
        doc(topology={"ep": 2, "tp": 2}), "topology.ep", "dp defaults to ep", id="tp-without-dp"
    ),
    pytest.param(doc(topology={"ep": 0}), "topology.ep", "between", id="ep-zero"),
    pytest.param(
        doc(topology={"mode": "mpi"}), "topology.mode", "simulated, distributed", id="mode"
    ),
    pytest.param(doc(topology=[2]), "topology", "expected a mapping", id="topology-type"),
    # routing
    pytest.param(doc(routing={"family": "pareto"}), "routing.family", "zipf", id="family"),
    pytest.param(
        doc(routing={"family": "trace"}), "routing.path", "required", id="trace-needs-path"
    ),
    pytest.param(
        doc(routing={"source": "trace"}), "routing.path", "required", id="source-trace-needs-path"
    ),
    pytest.param(
        doc(routing={"source": "trace", "family": "zipf", "path": "x"}),
        "routing.source",
        "conflicts",
        id="source-vs-family",
    ),
    pytest.param(
        doc(routing={"path": "x.json"}),
        "routing.path",
        "only read by family trace",
        id="path-without-trace",
    ),
    pytest.param(
        doc(routing={"layer": 3}),
        "routing.layer",
        "only read by family trace",
        id="layer-without-trace",
    ),
    pytest.param(
        doc(routing={"hot_rank": 2}), "routing.hot_rank", "< topology.ep", id="hot_rank-ge-ep"
    ),
    pytest.param(
        doc(routing={"hot_fraction": 1.5}), "routing.hot_fraction", "[0, 1]", id="hot_fraction"
    ),
    pytest.param(
        doc(routing={"empty_fraction": -0.1}),
        "routing.empty_fraction",
        "[0, 1]",
        id="empty_fraction",
    ),
    pytest.param(
        doc(routing={"family": "empty_experts", "empty_fraction": 0.9}),
        "routing.empty_fraction",
        "fewer than model.top_k",
        id="empty-leaves-too-few",
    ),
    pytest.param(doc(routing={"alpha": 0}), "routing.alpha", "> 0", id="alpha-zero"),
    pytest.param(doc(routing={"alpha": float("nan")}), "routing.alpha", "finite", id="alpha-nan"),
    pytest.param(doc(routing={"alpha": float("inf")}), "routing.alpha", "finite", id="alpha-inf"),
    pytest.param(doc(routing={"alpha": 10**400}), "routing.alpha", "finite", id="alpha-huge-int"),
    pytest.param(
        doc(routing={"alpha": "1.2"}), "routing.alpha", "expected a number", id="alpha-type"
    ),
    pytest.param(doc(routing={"seed": -1}), "routing.seed", "between", id="seed-negative"),
    pytest.param(
        doc(routing={"family": "full_capacity"}),
        "shape.tokens_per_rank",
        "multiple of",
        id="full-capacity-indivisible",
    ),
    # shape
    pytest.param(
        doc(shape={"tokens_per_rank": 1 << 21}),
        "shape.tokens_per_rank",
        "between",
        id="tokens-huge",
    ),
    pytest.param(
        doc(shape={"tokens_per_rank": 2.5}),
        "shape.tokens_per_rank",
        "got number",
        id="tokens-float",
    ),
    pytest.param(
        doc(shape={"capacity": "loose"}), "shape.capacity", "formula, tight", id="capacity-word"
    ),
    pytest.param(
        doc(shape={"capacity": 100}),
        "shape.capacity",
        "multiple of shape.alignment",
        id="capacity-not-aligned",
    ),
    pytest.param(doc(shape={"capacity": 0}), "shape.capacity", "positive", id="capacity-zero"),
    pytest.param(
        doc(shape={"alignment": 16, "tokens_per_rank": None}),
        "shape.tokens_per_rank",
        "expected an integer",
        id="tokens-null",
    ),
    pytest.param(
        {k: v for k, v in BASE.items() if k != "shape"}, "shape", "required", id="shape-missing"
    ),
    pytest.param(
        {**BASE, "shape": {"alignment": 16}},
        "shape.tokens_per_rank",
        "required",
        id="tokens-missing",
    ),
    pytest.param(
        {
            **doc(model={"experts": 16384, "top_k": 16384}),
            "topology": {"ep": 4096},
            "shape": {"tokens_per_rank": 1 << 20},
        },
        "shape.tokens_per_rank",
        "int32",
        id="rows-beyond-int32",
    ),
    # measure
    pytest.param(
        doc(measure={"regimes": ["trace"]}),
        "measure.regimes[0]",
        "ffn, profile, kernel",
        id="regime",
    ),
    pytest.param(doc(measure={"regimes": []}), "measure.regimes", "empty", id="regimes-empty"),
    pytest.param(
        doc(measure={"regimes": "kernel"}), "measure.regimes", "expected a list", id="regimes-type"
    ),
    pytest.param(
        doc(measure={"stages": ["act", "fc3"]}), "measure.stages[1]", "scatter", id="stage"
    ),
    pytest.param(
        doc(measure={"stages": ["act", "act"]}), "measure.stages[1]", "twice", id="stage-twice"
    ),
    pytest.param(doc(measure={"warmup": -1}), "measure.warmup", "between", id="warmup"),
    pytest.param(doc(measure={"blocks": 0}), "measure.blocks", "between", id="blocks"),
    pytest.param(doc(measure={"iterations": 0}), "measure.iterations", "between", id="iterations"),
    pytest.param(
        doc(measure={"ranks": [0, 2]}), "measure.ranks[1]", "topology.ep", id="rank-ge-ep"
    ),
    pytest.param(doc(measure={"ranks": [1, 1]}), "measure.ranks[1]", "twice", id="rank-twice"),
    pytest.param(doc(measure={"ranks": []}), "measure.ranks", "empty", id="ranks-empty"),
    pytest.param(
        doc(arms=["stock"], measure={"baseline": "prefix_sum"}),
        "measure.baseline",
        "scenario's arms",
        id="baseline-not-run",
    ),
    pytest.param(
        doc(measure={"graph": "yes"}), "measure.graph", "expected a boolean", id="graph-type"
    ),
    # top level
    pytest.param(
        {k: v for k, v in BASE.items() if k != "name"}, "name", "required", id="name-missing"
    ),
    pytest.param(doc(name="two\nlines"), "name", "one-line", id="name-multiline"),
    pytest.param(doc(description=["a"]), "description", "expected a string", id="description"),
    pytest.param(doc(precision="fp4"), "precision", "fp8, bf16", id="precision"),
    pytest.param(doc(activation="gelu"), "activation", "silu, swiglu_oai", id="activation"),
    pytest.param(doc(device="tpu"), "device", "auto, cpu, cuda", id="device"),
    pytest.param(doc(arms=["stock", "magic"]), "arms[1]", "prefix_sum", id="arm-unknown"),
    pytest.param(doc(arms=[]), "arms", "empty", id="arms-empty"),
    pytest.param(doc(arms=["stock", "stock"]), "arms[1]", "twice", id="arm-twice"),
    pytest.param(
        doc(expect_sources={"stock": "abc"}), "expect_sources.stock", "64 hex", id="pin-not-sha256"
    ),
    pytest.param(
        doc(arms=["stock"], expect_sources={"prefix_sum": "a" * 64}),
        "expect_sources.prefix_sum",
        "does not run",
        id="pin-arm-not-run",
    ),
    pytest.param(
        doc(expect_sources={"other": "a" * 64}),
        "expect_sources.other",
        "unknown key",
        id="pin-arm-unknown",
    ),
    pytest.param(doc(modle=1), "modle", "unknown key; expected one of name", id="top-unknown"),
    pytest.param({**BASE, 3: "x"}, "", "keys must be strings", id="top-int-key"),
    # sweep
    pytest.param(
        doc(sweep={"shape.tokens": [1]}),
        "sweep.shape.tokens",
        "unknown key",
        id="sweep-unknown-path",
    ),
    pytest.param(doc(sweep={"name": ["a"]}), "sweep.name", "unknown key", id="sweep-name"),
    pytest.param(
        doc(sweep={"shape.tokens_per_rank": 4}),
        "sweep.shape.tokens_per_rank",
        "expected a list",
        id="sweep-not-list",
    ),
    pytest.param(
        doc(sweep={"shape.tokens_per_rank": []}),
        "sweep.shape.tokens_per_rank",
        "empty",
        id="sweep-empty-list",
    ),
    pytest.param(
        doc(sweep={"shape.tokens_per_rank": [{"a": 1}]}),
        "sweep.shape.tokens_per_rank[0]",
        "scalar",
        id="sweep-value-mapping",
    ),
    pytest.param(
        doc(sweep=["shape.tokens_per_rank"]), "sweep", "expected a mapping", id="sweep-type"
    ),
    pytest.param(
        doc(sweep={"routing.seed": list(range(101)), "shape.tokens_per_rank": list(range(1, 101))}),
        "sweep",
        "10,000",
        id="sweep-too-many-cases",
    ),
    pytest.param(
        doc(sweep={"shape.tokens_per_rank": [4, 0, 8]}),
        "sweep.shape.tokens_per_rank[1]",
        "shape.tokens_per_rank: must be",
        id="sweep-bad",
    ),
    pytest.param(
        doc(sweep={"shape.alignment": [100, 16]}),
        "sweep.shape.alignment[0]",
        "power of two",
        id="sweep-bad-first",
    ),
    pytest.param(
        doc(sweep={"model.experts": [8, 7]}),
        "sweep.model.experts[1]",
        "topology.ep: must divide",
        id="sweep-bad-combination-one-key",
    ),
    pytest.param(
        doc(sweep={"shape.alignment": [16, 64], "shape.capacity": [64, 96]}),
        "sweep.shape.capacity[1]",
        "case c003",
        id="sweep-bad-pair",
    ),
    pytest.param(
        doc(sweep={"routing.seed": [1, 2], "measure.ranks": [[0], [1, 2]]}),
        "sweep.measure.ranks[1]",
        "measure.ranks[1]: must be in [0, topology.ep = 2)",
        id="sweep-bad-list-item",
    ),
    pytest.param(
        doc(sweep={"model.experts": [8, 7], "routing.seed": [1, 2]}),
        "sweep",
        "case c002-experts=7-seed=1",
        id="sweep-bad-case",
    ),
    pytest.param(
        doc(
            model="deepseek-v4-flash",
            topology={"ep": 8},
            sweep={"model.preset": ["deepseek-v4-flash", "gpt-oss-20b"]},
        ),
        "sweep.model.preset[1]",
        "model.hidden",
        id="sweep-preset-gpt-oss",
    ),
]


@pytest.mark.parametrize(("document", "field", "fragment"), RULES)
def test_rule(document, field, fragment):
    fails(document, field, fragment)


@pytest.mark.parametrize(
    "text, fragment",
    [
        pytest.param("- a\n- b\n", "expected a mapping at the top level, got a list", id="list"),
        pytest.param("just a string\n", "got string", id="scalar"),
        pytest.param("", "empty document", id="empty"),
        pytest.param("# only a comment\n", "empty document", id="comment-only"),
        pytest.param("name: t\nname: u\n", "duplicate key 'name'", id="duplicate-key"),
        pytest.param("name: t\nmodel: {id: a, id: b}\n", "line 2", id="duplicate-nested-key"),
        pytest.param("name: t\nmodel: [a\n", "YAML syntax error at line 3, column 1", id="syntax"),
        pytest.param("name: t\n\tmodel: x\n", "YAML syntax error at line 2", id="tab"),
        pytest.param("a: 1\n---\nb: 2\n", "single document", id="two-documents"),
        pytest.param("[" * 5000, "nested too deeply", id="deep-nesting"),
        pytest.param("name: t\nx: " + "9" * 5000 + "\n", "cannot be read", id="huge-int-literal"),
        pytest.param("name: t\nx: 2024-13-45\n", "cannot be read", id="bad-date"),
        pytest.param("name: t\nx: !custom 3\n", "tag", id="unknown-tag"),
        pytest.param("name: t\u0000\n", "YAML error", id="nul"),
    ],
)
def test_document_level_errors(text, fragment):
    fails(text, "", fragment)
