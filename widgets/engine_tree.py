"""The engine configuration of the current run as a tree: the speculative config first, then
every field of the engine start line, then the API server's non-default args (secrets already
redacted by the parser). Fields that differ from the previous run are marked."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rich.style import Style
from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from vllm_console.console.output.display import safe_text
from vllm_console.console.parsers.engine import EngineConfig, NonDefaultArgs
from vllm_console.console.parsers.pyrepr import to_jsonable
from vllm_console.widgets.status import STATUS_CLASSES, status_style

_SAME: Any = object()  # "no change" marker (None is a real previous value)

FIRST = ("speculative_config", "model", "tokenizer", "dtype", "max_seq_len",
         "tensor_parallel_size", "quantization", "enforce_eager")


@dataclass(frozen=True)
class EngineView:
    """The current run's engine config, the previous run's (for change marks), the args."""

    current: EngineConfig | None = None
    previous: EngineConfig | None = None
    args: NonDefaultArgs | None = None
    note: str = ""
    """Shown instead of the config when there is none to show and a reason (URL-only mode)."""


def _short(value: Any) -> str:
    return safe_text(repr(value) if isinstance(value, str) else str(value), 160)


def changed_fields(current: EngineConfig, previous: EngineConfig | None) -> dict[str, Any]:
    """Field -> previous value, for fields whose value differs from the previous run."""
    if previous is None:
        return {}
    now = to_jsonable(dict(current.fields))
    before = to_jsonable(dict(previous.fields))
    return {k: before.get(k, "<absent>") for k in now.keys() | before.keys()
            if now.get(k) != before.get(k)}


class EngineTree(Tree[str]):
    """Renders an `EngineView`."""

    COMPONENT_CLASSES = STATUS_CLASSES

    view: reactive[EngineView] = reactive(EngineView, always_update=True)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("engine", id=id)
        self.show_root = False

    def watch_view(self, view: EngineView) -> None:
        self.clear()
        current = view.current
        if current is None:
            self.root.add_leaf(Text(view.note or "no engine start in the current log yet",
                                    style="italic"))
            self.border_title = "Engine config"
            return
        changes = changed_fields(current, view.previous)
        self.border_title = (f"Engine config · vLLM {current.version or '?'}"
                             + (f" · {len(changes)} changed since last run" if changes else ""))
        fields = to_jsonable(dict(current.fields))
        order = [k for k in FIRST if k in fields] + sorted(k for k in fields if k not in FIRST)
        for key in order:
            self._add(self.root, key, fields[key], changes.get(key, _SAME),
                      expand=key == "speculative_config")
        for key in sorted(k for k in changes if k not in fields):
            self._add(self.root, key, "<absent>", changes[key])
        if view.args is not None:
            node = self.root.add(Text("non-default args (API server)", style="bold"))
            args = to_jsonable(dict(view.args.args))
            for key in sorted(args):
                self._add(node, key, args[key], _SAME)

    def _add(self, parent: TreeNode[str], key: str, value: Any, before: Any = _SAME,
             expand: bool = False) -> None:
        label = Text()
        label.append(safe_text(key, 80), style="bold")
        changed = before is not _SAME
        if isinstance(value, Mapping) or (isinstance(value, list) and len(value) > 6):
            node = parent.add(self._mark(label, changed, before), expand=expand)
            items = value.items() if isinstance(value, Mapping) else enumerate(value)
            for k, v in items:
                self._add(node, str(k), v)
            return
        label.append(" = ")
        label.append(_short(value))
        parent.add_leaf(self._mark(label, changed, before))

    def _mark(self, label: Text, changed: bool, before: Any) -> Text:
        if changed:
            label.append(f"  ● changed (was {_short(before)})",
                         style=status_style(self, "warn") + Style(bold=True))
        return label

