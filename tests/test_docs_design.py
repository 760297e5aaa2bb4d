"""docs/design.md says only what the code keeps true: its floor plan's imports column is what
each folder of `console/` really imports, its rows stand in the order of pyproject's layers
contract, and its hosts-file example is the one `vllm-console init` writes."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

from vllm_console.console.cli.commands.init import TEMPLATE

ROOT = Path(__file__).resolve().parents[1]
DESIGN = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
OWN = ("checks", "widgets", "themes")


def _unit(module: str) -> str | None:
    """Which part of the product a module of it belongs to: `checks`, `widgets`, `themes`, a
    folder (or `settings`) of `console/`, or `console` for the package's face."""
    parts = module.split(".")
    if parts[0] != "vllm_console" or len(parts) < 2:
        return None
    if parts[1] in OWN:
        return parts[1]
    if parts[1] != "console":
        return None
    return parts[2] if len(parts) > 2 else "console"


def _imports(folder: Path) -> set[str]:
    """What the modules of a folder import of the product, anywhere in them (at the top, in a
    function, for the type checker alone), the folder itself left out."""
    found: set[str] = set()
    for path in folder.rglob("*.py"):
        if "site-packages" in path.parts:  # the simulated host's own vLLM
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module:
                unit = _unit(node.module)
                if unit == "console" and node.module == "vllm_console.console":
                    found |= {a.name if (ROOT / "console" / a.name).is_dir() else "console"
                              for a in node.names}
                elif unit is not None:
                    found.add(unit)
            elif isinstance(node, ast.Import):
                found |= {u for a in node.names if (u := _unit(a.name)) is not None}
    return found - {folder.name}


def _floor_plan() -> list[tuple[str, set[str]]]:
    """(folder, the names its imports column gives) for each row of the floor plan."""
    section = DESIGN.split("### The floor plan of `console/`", 1)[1]
    rows = []
    for line in section.splitlines():
        m = re.match(r"\| `(\w+)/` \|.*\| ([^|]*) \|$", line)
        if m is not None:
            rows.append((m[1], set(re.findall(r"`(\w+)`", m[2]))))
        elif rows and not line.startswith("|"):
            break
    return rows


def test_the_floor_plan_names_what_each_folder_really_imports() -> None:
    rows = _floor_plan()
    folders = sorted(p.name for p in (ROOT / "console").iterdir()
                     if (p / "__init__.py").is_file())
    assert sorted(name for name, _ in rows) == folders
    wrong = {name: f"the doc says {sorted(said)}, the code imports {sorted(real)}"
             for name, said in rows if said != (real := _imports(ROOT / "console" / name))}
    assert not wrong, wrong


def test_the_floor_plan_stands_in_the_order_of_the_layers_contract() -> None:
    """Bottom first, as pyproject's "layers" contract lists them top first."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c["layers"] for c in contracts["contracts"] if c["type"] == "layers")
    order = [m.rsplit(".", 1)[1] for layer in reversed(layers)
             for m in (name.strip() for name in layer.split("|"))
             if m.startswith("vllm_console.console.")
             and (ROOT / "console" / m.rsplit(".", 1)[1]).is_dir()]
    assert [name for name, _ in _floor_plan()] == order


def test_the_hosts_file_example_is_the_one_init_writes() -> None:
    example = DESIGN.split("Hosts file (TOML", 1)[1].split("```toml\n", 1)[1].split("```", 1)[0]
    assert example == TEMPLATE
    for key in ("container", "runtime", "stall_s"):  # the keys the doc's copy once lacked
        assert f"# {key} = " in example
