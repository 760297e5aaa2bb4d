"""The model configs a simulated host puts on disk: the Qwen3.6-27B target and its DFlash drafter,
in the z-lab native layout or the speculators layout.

Values follow docs/vllm-facts.md ("Draft and target configs"). The drafter's *trained* truth (what
its weights expect) is `checkpoint_truth()`; the fake engine compares what it actually builds with
it.
"""

from __future__ import annotations

from typing import Any

from vllm_console.console.sim.scenarios import (
    RIGHT_LAYER_TYPES,
    RIGHT_MASK_TOKEN_ID,
    RIGHT_SLIDING_WINDOW,
    RIGHT_TARGET_LAYER_IDS,
    DraftSpec,
)

TARGET_DIR_NAME = "Qwen3.6-27B"
DRAFT_DIR_NAME = "Qwen3.6-27B-DFlash"
DRAFT_REPO_ID = "z-lab/Qwen3.6-27B-DFlash"
TARGET_REPO_ID = "Qwen/Qwen3.6-27B"

TARGET_LAYERS = 64
HIDDEN_SIZE = 5120
VOCAB_SIZE = 248320
DRAFT_LAYERS = 5
BLOCK_SIZE = 16


def target_config() -> dict[str, Any]:
    """Qwen3.6-27B: 64 layers (3 linear-attention : 1 full), hidden 5120, vocab 248320."""
    layer_types = ["full_attention" if (i + 1) % 4 == 0 else "linear_attention"
                   for i in range(TARGET_LAYERS)]
    return {
        "architectures": ["Qwen3_5ForCausalLM"],
        "model_type": "qwen3_5_text",
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 248044,
        "eos_token_id": 248046,
        "full_attention_interval": 4,
        "head_dim": 256,
        "hidden_act": "silu",
        "hidden_size": HIDDEN_SIZE,
        "initializer_range": 0.02,
        "intermediate_size": 17408,
        "layer_types": layer_types,
        "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 128,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 48,
        "linear_value_head_dim": 128,
        "max_position_embeddings": 262144,
        "num_attention_heads": 24,
        "num_hidden_layers": TARGET_LAYERS,
        "num_key_value_heads": 4,
        "partial_rotary_factor": 0.25,
        "rms_norm_eps": 1e-06,
        "rope_theta": 10000000,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.57.1",
        "use_cache": True,
        "vocab_size": VOCAB_SIZE,
    }


def target_extras() -> dict[str, dict[str, Any]]:
    """The small JSON files beside the target's config.json."""
    return {
        "generation_config.json": {"bos_token_id": 248044, "do_sample": True,
                                   "eos_token_id": [248046, 248044], "temperature": 0.6,
                                   "top_k": 20, "top_p": 0.95,
                                   "transformers_version": "4.57.1"},
        "tokenizer_config.json": {"add_bos_token": False, "bos_token": None,
                                  "eos_token": "<|im_end|>", "model_max_length": 262144,
                                  "pad_token": "<|endoftext|>",
                                  "tokenizer_class": "Qwen2Tokenizer"},
    }


def _swa_fields(spec: DraftSpec) -> dict[str, Any]:
    return {
        "layer_types": list(spec.layer_types),
        "use_sliding_window": "sliding_attention" in spec.layer_types,
        "sliding_window": spec.sliding_window,
        "max_window_layers": sum(t == "sliding_attention" for t in spec.layer_types),
    }


def _draft_layer_config() -> dict[str, Any]:
    """The drafter's transformer layer shape (Qwen3 decoder layers)."""
    return {
        "model_type": "qwen3",
        "attention_bias": False,
        "attention_dropout": 0.0,
        "head_dim": 128,
        "hidden_act": "silu",
        "hidden_size": HIDDEN_SIZE,
        "initializer_range": 0.02,
        "intermediate_size": 17408,
        "max_position_embeddings": 262144,
        "num_attention_heads": 40,
        "num_hidden_layers": DRAFT_LAYERS,
        "num_key_value_heads": 8,
        "rms_norm_eps": 1e-06,
        "rope_theta": 10000000,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "vocab_size": VOCAB_SIZE,
    }


def draft_config(spec: DraftSpec) -> dict[str, Any]:
    """The draft config.json a scenario writes (native z-lab layout or speculators layout)."""
    if spec.format == "speculators":
        return speculators_draft_config(spec)
    config: dict[str, Any] = {
        "_name_or_path": DRAFT_REPO_ID,
        "architectures": ["DFlashDraftModel"],
        "auto_map": {"AutoModel": "dflash.DFlashDraftModel"},
        "block_size": BLOCK_SIZE,
        "bos_token_id": 248044,
        "dflash_config": {"mask_token_id": spec.mask_token_id,
                          "target_layer_ids": list(spec.target_layer_ids)},
        "eos_token_id": 248046,
        "num_target_layers": TARGET_LAYERS,
    }
    config.update(_draft_layer_config())
    config.update(_swa_fields(spec))
    config["transformers_version"] = "4.57.1"
    config["use_cache"] = True
    return dict(sorted(config.items()))


def speculators_draft_config(spec: DraftSpec) -> dict[str, Any]:
    """The same drafter in the speculators layout: SWA fields at top level, beside the DFlash
    fields, which only the algorithm's `update_dflash` carries into the extracted config."""
    return {
        "architectures": ["DFlashSpeculator"],
        "speculators_model_type": "dflash",
        "speculators_version": "0.3.0",
        "block_size": BLOCK_SIZE,
        "mask_token_id": spec.mask_token_id,
        "target_layer_ids": list(spec.target_layer_ids),
        "num_target_layers": TARGET_LAYERS,
        **_swa_fields(spec),
        "transformer_layer_config": _draft_layer_config(),
        "speculators_config": {
            "algorithm": "dflash",
            "default_proposal_method": "greedy",
            "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": BLOCK_SIZE - 1,
                                  "verifier_accept_k": 1, "accept_tolerance": 0.0}],
            "verifier": {"name_or_path": TARGET_REPO_ID,
                         "architectures": ["Qwen3_5ForCausalLM"]},
        },
        "torch_dtype": "bfloat16",
        "transformers_version": "4.57.1",
    }


def checkpoint_truth() -> dict[str, Any]:
    """What the drafter's weights were trained with; kept in .sim/sim.json for the fake engine."""
    return {
        "mask_token_id": RIGHT_MASK_TOKEN_ID,
        "target_layer_ids": list(RIGHT_TARGET_LAYER_IDS),
        "layer_types": list(RIGHT_LAYER_TYPES),
        "sliding_window": RIGHT_SLIDING_WINDOW,
        "num_hidden_layers": DRAFT_LAYERS,
        "causal": False,
    }
