"""Tiny models for the real-vLLM tier, made locally and deterministically (no hub).

Run with the fixture's interpreter (it has torch, transformers, tokenizers, safetensors):

    python make_models.py OUT_DIR

It writes, each a directory vLLM serves or drafts with:

- `target`: a 4-layer `Qwen3ForCausalLM` (hidden 128, 4 heads of 32, vocab 1024, bf16, random
  weights from seed 0) with a byte-level BPE tokenizer trained here on a few sentences. The
  embedding rows of special and unprintable tokens are zeroed, so greedy output is readable,
  repetitive text (which n-gram speculation accepts almost entirely).
- DFlash drafters in the z-lab config style (`DFlashDraftModel`, `dflash_config`,
  `layer_types`, `sliding_window`), two layers each, sharing the target's embeddings and head:
  - `dflash-right`: what this target's drafter should say: mask_token_id is `<|mask|>`,
    target_layer_ids [0, 2] (vLLM captures layers 1 and 3), every layer sliding (window 64):
    the SWA layout real vLLM 0.32 builds on the CPU (its V1 model runner);
  - `dflash-incident`: the incident's wrong config, scaled down: a mask id six off the right
    one (248064 for 248070 in the seed), target_layer_ids [1, 3] (the last one + 1 is the
    model's output, as 63 + 1 is on a 64-layer target), full attention on every layer;
  - `dflash-mixed`: sliding then full attention (the seed's shape), otherwise right: vLLM
    0.32 refuses it off the V2 model runner, and the CPU runs the V1 one;
  - `dflash-full`: right, with full attention on every layer (what the `dflash` profile,
    DFlash without SWA, judges).
  `reference-dflash.json` is `dflash-right`'s config.json: the reference the chain compares to.
- `target-2l`: the same target with 2 layers (same tokenizer): EAGLE-3's default auxiliary
  layers, (2, n // 2, n - 3), are invalid for it.
- EAGLE-3 heads (`LlamaForCausalLMEagle3`, one layer, the target's embeddings shared):
  - `eagle3-right`: `eagle_aux_hidden_state_layer_ids` [1, 2, 3], valid for the 4-layer target;
  - `eagle3-default`: no aux layer ids, so vLLM takes the model's default: on `target-2l` that
    is (2, 1, -1), two captured states where the head's fc wants three (the engine starts,
    then dies on the first request).
- `mimo-mtp`: a 2-layer `MiMoForCausalLM` (Qwen2 layers) carrying one MTP layer
  (`num_nextn_predict_layers: 1`, `model.mtp_layers.0.*`): the MTP model vLLM 0.32 serves on
  the CPU (`method: mtp` drafts with the target's own MTP layer).
- Draft models (`draft_model`: a one-layer `Qwen3ForCausalLM`):
  - `draft-right`: the target's tokenizer;
  - `draft-wrong-tokenizer`: the same vocabulary size, but a tokenizer of its own (other
    special tokens, other merges): vLLM runs it without a word, and accepts almost nothing.

Everything is a pure function of the seed: running it twice gives the same bytes.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import (
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
)

SEED = 0
HIDDEN = 128
HEADS = 4
KV_HEADS = 2
HEAD_DIM = 32  # the CPU attention backend refuses head_dim < 32
INTERMEDIATE = 256
TARGET_LAYERS = 4
DRAFT_LAYERS = 2
VOCAB = 1024
WINDOW = 64
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>", "<|mask|>"]
CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "a speculative decoder drafts tokens and the target model verifies them",
    "the draft model proposes and the target accepts or rejects each token",
    "sliding window attention keeps only the most recent tokens in view",
    "the server logs its engine configuration when it starts",
    "acceptance length is one plus the accepted tokens per draft",
    "hello world, this is a tiny model for tests",
    "numbers 0 1 2 3 4 5 6 7 8 9 and punctuation . , ; : ! ?",
]
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def make_tokenizer(out: Path, specials: list[str] = SPECIALS,
                   corpus: list[str] = CORPUS) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB - 64, special_tokens=specials, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|im_end|>",
        pad_token="<|pad|>", unk_token=None, model_max_length=512)
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    return fast


def readable_ids(tok: PreTrainedTokenizerFast) -> list[int]:
    """Tokens whose text is printable and not special: the only ones greedy output may use."""
    special = set(tok.all_special_ids)
    keep = []
    for token_id in range(len(tok)):
        text = tok.decode([token_id])
        if token_id not in special and text and text.isprintable() and text.isascii():
            keep.append(token_id)
    return keep


def make_target(out: Path, tok: PreTrainedTokenizerFast, layers: int = TARGET_LAYERS,
                seed: int = SEED) -> Qwen3Config:
    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTERMEDIATE,
        num_hidden_layers=layers, num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS, head_dim=HEAD_DIM, max_position_embeddings=512,
        tie_word_embeddings=False, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id, torch_dtype="bfloat16")
    model = Qwen3ForCausalLM(config).to(torch.bfloat16)
    keep = torch.zeros(VOCAB, dtype=torch.bool)
    keep[readable_ids(tok)] = True
    with torch.no_grad():
        model.model.embed_tokens.weight[~keep] = 0
        model.lm_head.weight[~keep] = 0
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    return config


def draft_config(*, mask_token_id: int, target_layer_ids: list[int],
                 layer_types: list[str]) -> dict[str, object]:
    """A z-lab style DFlash drafter config.json for the tiny target."""
    return {
        "architectures": ["DFlashDraftModel"],
        "model_type": "qwen3",
        "block_size": 4,
        "dflash_config": {"mask_token_id": mask_token_id, "target_layer_ids": target_layer_ids},
        "num_target_layers": TARGET_LAYERS,
        "num_hidden_layers": DRAFT_LAYERS,
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "vocab_size": VOCAB,
        "max_position_embeddings": 512,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "layer_types": layer_types,
        "sliding_window": WINDOW,
        "use_sliding_window": any(t == "sliding_attention" for t in layer_types),
        "max_window_layers": DRAFT_LAYERS,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }


def draft_weights(n_aux: int) -> dict[str, torch.Tensor]:
    """Every tensor a DFlash drafter ships (no embeddings, no head: the target's are shared)."""
    gen = torch.Generator().manual_seed(SEED + 1)

    def rand(*shape: int) -> torch.Tensor:
        return (torch.randn(*shape, generator=gen) * 0.02).to(torch.bfloat16)

    def ones(n: int) -> torch.Tensor:
        return torch.ones(n, dtype=torch.bfloat16)

    weights = {"fc.weight": rand(HIDDEN, n_aux * HIDDEN), "hidden_norm.weight": ones(HIDDEN),
               "norm.weight": ones(HIDDEN)}
    for i in range(DRAFT_LAYERS):
        p = f"layers.{i}."
        weights.update({
            p + "input_layernorm.weight": ones(HIDDEN),
            p + "post_attention_layernorm.weight": ones(HIDDEN),
            p + "self_attn.q_proj.weight": rand(HEADS * HEAD_DIM, HIDDEN),
            p + "self_attn.k_proj.weight": rand(KV_HEADS * HEAD_DIM, HIDDEN),
            p + "self_attn.v_proj.weight": rand(KV_HEADS * HEAD_DIM, HIDDEN),
            p + "self_attn.o_proj.weight": rand(HIDDEN, HEADS * HEAD_DIM),
            p + "self_attn.q_norm.weight": ones(HEAD_DIM),
            p + "self_attn.k_norm.weight": ones(HEAD_DIM),
            p + "mlp.gate_proj.weight": rand(INTERMEDIATE, HIDDEN),
            p + "mlp.up_proj.weight": rand(INTERMEDIATE, HIDDEN),
            p + "mlp.down_proj.weight": rand(HIDDEN, INTERMEDIATE),
        })
    return weights


def write_drafter(out: Path, config: dict[str, object]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    ids = config["dflash_config"]["target_layer_ids"]  # type: ignore[index]
    save_file(draft_weights(len(ids)), str(out / "model.safetensors"),
              metadata={"format": "pt"})


def write_eagle3(out: Path, tok: PreTrainedTokenizerFast,
                 aux_layer_ids: list[int] | None) -> None:
    """A one-layer EAGLE-3 head for the tiny target (vLLM's `Eagle3LlamaForCausalLM`): its
    first layer attends over [embedding, hidden] (2 * hidden inputs), `fc` folds three target
    hidden states into one; embeddings come from the target."""
    config: dict[str, object] = {
        "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama",
        "hidden_size": HIDDEN, "intermediate_size": INTERMEDIATE, "num_hidden_layers": 1,
        "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM,
        "vocab_size": VOCAB, "draft_vocab_size": VOCAB, "target_hidden_size": HIDDEN,
        "max_position_embeddings": 512, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id,
    }
    if aux_layer_ids is not None:
        config["eagle_aux_hidden_state_layer_ids"] = aux_layer_ids
    gen = torch.Generator().manual_seed(SEED + 3)

    def rand(*shape: int) -> torch.Tensor:
        return (torch.randn(*shape, generator=gen) * 0.02).to(torch.bfloat16)

    ones = torch.ones(HIDDEN, dtype=torch.bfloat16)
    p = "layers.0."
    weights = {
        "fc.weight": rand(HIDDEN, 3 * HIDDEN), "norm.weight": ones,
        "lm_head.weight": rand(VOCAB, HIDDEN),
        p + "input_layernorm.weight": ones, p + "hidden_norm.weight": ones,
        p + "post_attention_layernorm.weight": ones,
        p + "self_attn.q_proj.weight": rand(HEADS * HEAD_DIM, 2 * HIDDEN),
        p + "self_attn.k_proj.weight": rand(KV_HEADS * HEAD_DIM, 2 * HIDDEN),
        p + "self_attn.v_proj.weight": rand(KV_HEADS * HEAD_DIM, 2 * HIDDEN),
        p + "self_attn.o_proj.weight": rand(HIDDEN, HEADS * HEAD_DIM),
        p + "mlp.gate_proj.weight": rand(INTERMEDIATE, HIDDEN),
        p + "mlp.up_proj.weight": rand(INTERMEDIATE, HIDDEN),
        p + "mlp.down_proj.weight": rand(HIDDEN, INTERMEDIATE),
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    save_file({k: v.clone() for k, v in weights.items()}, str(out / "model.safetensors"),
              metadata={"format": "pt"})
    tok.save_pretrained(out)


def make_mimo_mtp(out: Path, tok: PreTrainedTokenizerFast) -> None:
    """A tiny MiMo target with one MTP layer (the names MiMo checkpoints use)."""
    torch.manual_seed(SEED + 4)
    config = Qwen2Config(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTERMEDIATE,
        num_hidden_layers=2, num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
        max_position_embeddings=512, tie_word_embeddings=False, bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id, torch_dtype="bfloat16")
    model = Qwen2ForCausalLM(config).to(torch.bfloat16)
    weights = {k: v.clone().contiguous() for k, v in model.state_dict().items()}
    gen = torch.Generator().manual_seed(SEED + 5)

    def rand(*shape: int) -> torch.Tensor:
        return (torch.randn(*shape, generator=gen) * 0.02).to(torch.bfloat16)

    def ones() -> torch.Tensor:
        return torch.ones(HIDDEN, dtype=torch.bfloat16)

    p = "model.mtp_layers.0."
    weights.update({
        p + "token_layernorm.weight": ones(), p + "hidden_layernorm.weight": ones(),
        p + "input_proj.weight": rand(HIDDEN, 2 * HIDDEN), p + "final_layernorm.weight": ones(),
        p + "input_layernorm.weight": ones(), p + "post_attention_layernorm.weight": ones(),
        p + "self_attn.q_proj.weight": rand(HEADS * HEAD_DIM, HIDDEN),
        p + "self_attn.q_proj.bias": rand(HEADS * HEAD_DIM),
        p + "self_attn.k_proj.weight": rand(KV_HEADS * HEAD_DIM, HIDDEN),
        p + "self_attn.k_proj.bias": rand(KV_HEADS * HEAD_DIM),
        p + "self_attn.v_proj.weight": rand(KV_HEADS * HEAD_DIM, HIDDEN),
        p + "self_attn.v_proj.bias": rand(KV_HEADS * HEAD_DIM),
        p + "self_attn.o_proj.weight": rand(HIDDEN, HEADS * HEAD_DIM),
        p + "mlp.gate_proj.weight": rand(INTERMEDIATE, HIDDEN),
        p + "mlp.up_proj.weight": rand(INTERMEDIATE, HIDDEN),
        p + "mlp.down_proj.weight": rand(HIDDEN, INTERMEDIATE),
    })
    out.mkdir(parents=True, exist_ok=True)
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
    data = config.to_dict()
    data.update(architectures=["MiMoForCausalLM"], num_nextn_predict_layers=1)
    (out / "config.json").write_text(json.dumps(data, indent=2) + "\n")
    tok.save_pretrained(out)


def main(out: Path) -> None:
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    tok = make_tokenizer(out / "target")
    make_target(out / "target", tok)
    mask = tok.convert_tokens_to_ids("<|mask|>")
    right = draft_config(mask_token_id=mask, target_layer_ids=[0, 2],
                         layer_types=["sliding_attention"] * DRAFT_LAYERS)
    drafters = {
        "dflash-right": right,
        "dflash-incident": draft_config(mask_token_id=mask + 6, target_layer_ids=[1, 3],
                                        layer_types=["full_attention"] * DRAFT_LAYERS),
        "dflash-mixed": draft_config(mask_token_id=mask, target_layer_ids=[0, 2],
                                     layer_types=["sliding_attention", "full_attention"]),
        "dflash-full": draft_config(mask_token_id=mask, target_layer_ids=[0, 2],
                                    layer_types=["full_attention"] * DRAFT_LAYERS),
    }
    for name, config in drafters.items():
        write_drafter(out / name, config)
    (out / "reference-dflash.json").write_text(json.dumps(right, indent=2) + "\n")
    make_target(out / "target-2l", tok, layers=2)
    write_eagle3(out / "eagle3-right", tok, aux_layer_ids=[1, 2, 3])
    write_eagle3(out / "eagle3-default", tok, aux_layer_ids=None)
    make_mimo_mtp(out / "mimo-mtp", tok)
    make_target(out / "draft-right", tok, layers=1, seed=SEED + 2)
    other = make_tokenizer(out / "draft-wrong-tokenizer", list(reversed(SPECIALS)),
                           list(reversed(CORPUS)))
    make_target(out / "draft-wrong-tokenizer", other, layers=1, seed=SEED + 2)
    for path in out.rglob("*"):  # the login user of the SSH tests serves them
        path.chmod(0o755 if path.is_dir() else 0o644)
    print(json.dumps({"out": str(out), "mask_token_id": mask,
                      "drafters": sorted(p.name for p in out.iterdir() if p.is_dir())}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
