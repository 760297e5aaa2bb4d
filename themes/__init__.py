"""Colour themes: Textual `Theme` objects carrying the console's domain variables.

Status colours are theme variables (`status-ok`, `status-warn`, `status-fail`,
`status-unknown`), so the `.tcss` never names a hex colour; the render paths ask for them as
component classes (`status--ok`, ... in widgets/status.py). Only these themes are registered.
"""

from __future__ import annotations

from importlib import resources

from textual.theme import Theme


def _theme(name: str, *, dark: bool, ok: str, warn: str, fail: str, unknown: str,
           primary: str, secondary: str, accent: str, foreground: str, background: str,
           surface: str, panel: str, spec: str, aux: str) -> Theme:
    return Theme(
        name=name, dark=dark, primary=primary, secondary=secondary, accent=accent,
        foreground=foreground, background=background, surface=surface, panel=panel,
        success=ok, warning=warn, error=fail,
        variables={
            "status-ok": ok,
            "status-warn": warn,
            "status-fail": fail,
            "status-unknown": unknown,
            "log-spec": spec,
            "log-aux": aux,
        },
    )


THEMES: dict[str, Theme] = {
    theme.name: theme
    for theme in (
        _theme("vllm-dark", dark=True, ok="#4EBF71", warn="#E5A33C", fail="#E0565B",
               unknown="#8A8F98", primary="#5A9BF6", secondary="#3B6EA8", accent="#C58AF9",
               foreground="#E0E2E6", background="#14161A", surface="#1C1F24", panel="#262A31",
               spec="#4FC3C9", aux="#C58AF9"),
        _theme("vllm-light", dark=False, ok="#1E7B3A", warn="#A15C00", fail="#B3261E",
               unknown="#5F6368", primary="#1A5FB4", secondary="#3D7CC9", accent="#7B3FB0",
               foreground="#1B1D21", background="#FAFAF8", surface="#F0F1F3", panel="#E3E5E8",
               spec="#00707A", aux="#7B3FB0"),
        _theme("vllm-high-contrast", dark=True, ok="#00FF5F", warn="#FFD700", fail="#FF3030",
               unknown="#FFFFFF", primary="#00AFFF", secondary="#0087FF", accent="#FF5FFF",
               foreground="#FFFFFF", background="#000000", surface="#000000", panel="#1C1C1C",
               spec="#00FFFF", aux="#FF5FFF"),
    )
}

DEFAULT_THEME = "vllm-dark"


def stylesheet_path() -> str:
    """The console's stylesheet (`console.tcss`), shipped beside this module."""
    return str(resources.files(__package__).joinpath("console.tcss"))
