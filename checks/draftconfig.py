"""Reading DFlash draft and target configs the way vLLM does, whatever their layout.

Draft configs keep `mask_token_id` / `target_layer_ids` under `dflash_config` (current z-lab
checkpoints) or at the top level (older ones); the SWA window is `sliding_window` or
`dflash_config.swa_window_size`. Targets may nest their text model under `text_config`
(multimodal Qwen3.x). These helpers give one normalised view so the checks never care.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

_DFLASH_KEYS = ("mask_token_id", "target_layer_ids")
SPECULATORS_KEY = "speculators_model_type"


def is_speculators(cfg: Mapping[str, Any]) -> bool:
    """A speculators-format config (vLLM extracts the HF config from it)."""
    return SPECULATORS_KEY in cfg


def dflash_section(cfg: Mapping[str, Any]) -> Mapping[str, Any]:
    """`dflash_config` when it is a mapping, else an empty one."""
    section = cfg.get("dflash_config")
    return section if isinstance(section, Mapping) else {}


def normalised(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """One view of any layout: `dflash_config`'s mask/layer ids folded to the top level (the
    nested value wins, as in vLLM); for the speculators layout, `transformer_layer_config`
    under the top-level fields and `aux_hidden_state_layer_ids` as `target_layer_ids` (its
    `architectures` names the speculator class, not the model: left out); `_`-prefixed
    bookkeeping keys dropped."""
    out: dict[str, Any] = {}
    if is_speculators(cfg):
        layer = cfg.get("transformer_layer_config")
        out.update(layer if isinstance(layer, Mapping) else {})
        out.update({k: v for k, v in cfg.items()
                    if k not in ("transformer_layer_config", "architectures")})
        if "target_layer_ids" not in out and "aux_hidden_state_layer_ids" in cfg:
            out["target_layer_ids"] = cfg["aux_hidden_state_layer_ids"]
    else:
        out.update(cfg)
    out = {k: v for k, v in out.items() if not str(k).startswith("_")}
    section = dflash_section(cfg)
    for key in _DFLASH_KEYS:
        if key in section:
            out[key] = section[key]
    if "sliding_window" not in out and section.get("swa_window_size") is not None:
        out["sliding_window"] = section["swa_window_size"]
    return out


def target_layer_ids(cfg: Mapping[str, Any]) -> list[int] | None:
    """The target layers the drafter reads, when they are a list of ints."""
    ids = normalised(cfg).get("target_layer_ids")
    if isinstance(ids, list) and all(_is_int(i) for i in ids):
        return list(ids)
    return None


def layer_types(cfg: Mapping[str, Any]) -> list[str] | None:
    """`layer_types` when it is a list of strings."""
    types = cfg.get("layer_types")
    if isinstance(types, list) and all(isinstance(t, str) for t in types):
        return list(types)
    return None


def swa_window(cfg: Mapping[str, Any]) -> int | None:
    """The sliding window the drafter's SWA layers use (top-level or dflash_config)."""
    for value in (dflash_section(cfg).get("swa_window_size"), cfg.get("sliding_window")):
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def sliding_layers(cfg: Mapping[str, Any], sliding: str = "sliding_attention") -> list[int]:
    """Indices of the layers the config makes sliding (`dflash_config.use_swa` makes all)."""
    types = layer_types(cfg)
    if dflash_section(cfg).get("use_swa") is True:
        n = cfg.get("num_hidden_layers")
        count = len(types) if types is not None else \
            (n if isinstance(n, int) and not isinstance(n, bool) else 0)
        return list(range(count))
    return [i for i, t in enumerate(types or []) if t == sliding]


def text_value(cfg: Mapping[str, Any], key: str) -> Any:
    """A target config value, looking into `text_config` when the top level lacks it."""
    if key in cfg:
        return cfg[key]
    text = cfg.get("text_config")
    if isinstance(text, Mapping):
        return text.get(key)
    return None


def default_spacing(target_layers: int, draft_layers: int) -> list[int]:
    """z-lab's default `target_layer_ids`: round(1 + i*(N-4)/(k-1)) for i in 0..k-1."""
    if draft_layers <= 1:
        return [1]
    step = (target_layers - 4) / (draft_layers - 1)
    return [math.floor(1 + i * step + 0.5) for i in range(draft_layers)]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
