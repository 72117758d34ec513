"""Model presets: the MoE FFN shapes of public models, one plain dict.

Each entry names the Hugging Face repository and the commit of the ``config.json`` the figures were
read from, and which fields of that file they came from (the field names differ between model
families). ``intermediate`` is the width of one routed expert (``moe_intermediate_size`` where the
config has both a dense and an expert width); ``experts`` counts routed experts only (shared
experts are not part of the grouped FFN measured here). ``layers`` counts the model's layers and
``dense_layers`` lists those without a routed MoE (the step regime times every other layer), with
``layers_source`` saying where the figures come from.

Revisions are Hugging Face commit hashes of the model repository. Each was found pinned in public
material that links that exact revision's ``config.json`` or loads the model at it; the shapes
agree with the config at that revision. Nothing here is fetched from a network at run time.
A preset whose revision could not be confirmed carries the string ``"unpinned"`` (none today).

``transformers`` names the model's family in Hugging Face transformers (its ``model_type``, the
folder under ``transformers/models/``): the experts class an ``hf:<backend>`` arm builds for a
scenario at this preset's widths (``moebench.integrations.transformers``).
"""

from __future__ import annotations

PRESETS: dict[str, dict] = {
    "deepseek-v3": {
        "transformers": "deepseek_v3",
        "id": "deepseek-ai/DeepSeek-V3",
        "revision": "e815299b0bcbac849fa540c768ef21845365c9eb",
        "hidden": 7168,
        "intermediate": 2048,
        "experts": 256,
        "top_k": 8,
        "source": "config.json: hidden_size, moe_intermediate_size, n_routed_experts, "
        "num_experts_per_tok",
        "layers": 61,
        "dense_layers": (0, 1, 2),
        "layers_source": (
            "config.json: num_hidden_layers 61, first_k_dense_replace 3 (layers "
            "0-2 dense; the SGLang load files' rows 0-2 are zero)"
        ),
    },
    "deepseek-v4-flash": {
        "transformers": "deepseek_v4",
        "id": "deepseek-ai/DeepSeek-V4-Flash",
        "revision": "60d8d70770c6776ff598c94bb586a859a38244f1",
        "hidden": 4096,
        "intermediate": 2048,
        "experts": 256,
        "top_k": 6,
        "source": "config.json: hidden_size, moe_intermediate_size, n_routed_experts, "
        "num_experts_per_tok",
        "layers": 43,
        "dense_layers": (),
        "layers_source": (
            "43 layers, every one MoE (NeMo AutoModel's DeepseekV4Config "
            "defaults: num_hidden_layers 43, an all-MoE backbone; the first "
            "num_hash_layers 3 route by hash, still MoE)"
        ),
    },
    "gpt-oss-20b": {
        "transformers": "gpt_oss",
        "id": "openai/gpt-oss-20b",
        "revision": "6cee5e81ee83917806bbde320786a8fb61efebee",
        "hidden": 2880,
        "intermediate": 2880,
        "experts": 32,
        "top_k": 4,
        "source": "config.json: hidden_size, intermediate_size, num_local_experts, "
        "num_experts_per_tok (= experts_per_token)",
        "layers": 24,
        "dense_layers": (),
        "layers_source": ("config.json: num_hidden_layers 24, every layer MoE"),
    },
    "gpt-oss-120b": {
        "transformers": "gpt_oss",
        "id": "openai/gpt-oss-120b",
        "revision": "b5c939de8f754692c1647ca79fbf85e8c1e70f8a",
        "hidden": 2880,
        "intermediate": 2880,
        "experts": 128,
        "top_k": 4,
        "source": "config.json: hidden_size, intermediate_size, num_local_experts, "
        "num_experts_per_tok (= experts_per_token)",
        "layers": 36,
        "dense_layers": (),
        "layers_source": ("config.json: num_hidden_layers 36, every layer MoE"),
    },
    "qwen3-30b-a3b": {
        "transformers": "qwen3_moe",
        "id": "Qwen/Qwen3-30B-A3B",
        "revision": "ad44e777bcd18fa416d9da3bd8f70d33ebb85d39",
        "hidden": 2048,
        "intermediate": 768,
        "experts": 128,
        "top_k": 8,
        "source": "config.json: hidden_size, moe_intermediate_size, num_experts, "
        "num_experts_per_tok",
        "layers": 48,
        "dense_layers": (),
        "layers_source": (
            "config.json: num_hidden_layers 48, decoder_sparse_step 1, mlp_only_layers []"
        ),
    },
    "mixtral-8x7b": {
        "transformers": "mixtral",
        "id": "mistralai/Mixtral-8x7B-v0.1",
        "revision": "fc7ac94680e38d7348cfa806e51218e6273104b0",
        "hidden": 4096,
        "intermediate": 14336,
        "experts": 8,
        "top_k": 2,
        "source": "config.json: hidden_size, intermediate_size, num_local_experts, "
        "num_experts_per_tok",
        "layers": 32,
        "dense_layers": (),
        "layers_source": ("config.json: num_hidden_layers 32, every layer MoE"),
    },
    "olmoe-1b-7b": {
        "transformers": "olmoe",
        "id": "allenai/OLMoE-1B-7B-0924",
        "revision": "6d84c48581ece794365f2b8e9cfb043c68ade9c5",
        "hidden": 2048,
        "intermediate": 1024,
        "experts": 64,
        "top_k": 8,
        "source": "config.json: hidden_size, intermediate_size, num_experts, num_experts_per_tok",
        "layers": 16,
        "dense_layers": (),
        "layers_source": ("config.json: num_hidden_layers 16, every layer MoE"),
    },
}
