"""`vllm-console --help` and `--version` without the settings model: the top level's text is the
full parser's, and they import neither pydantic nor the settings (they took ~0.6 s on a busy
machine when the parser was built from the models first)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from console.cli.parser import build_parser, subcommands

TOP_LEVEL = ["--help", "-h", "--version"]


@pytest.mark.parametrize("words", [["--help"], ["-h"], ["--version"], ["--help", "--version"]])
def test_the_fast_top_level_says_what_the_full_parser_says(
        words: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    outputs = []
    for settings in (True, False):
        with pytest.raises(SystemExit) as exit_:
            build_parser(settings=settings).parse_args(words)
        assert exit_.value.code == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]
    assert outputs[0].startswith("usage: vllm-console") or outputs[0].startswith("vllm-console ")


def test_the_fast_parser_differs_only_in_the_settings_options_which_the_top_level_does_not_show(
) -> None:
    """What the fast path leaves out is only ever in a subcommand's help: were an option of
    the settings ever shown at the top level, the test above would see it; this one checks that
    the subcommands really differ, so the comparison above is not between two empty cuts."""
    full, fast = subcommands(build_parser()), subcommands(build_parser(settings=False))
    assert list(full) == list(fast)
    assert "--nvidia-smi" in full["tui"].format_help()
    assert "--nvidia-smi" not in fast["tui"].format_help()
    assert full["demo"].format_help() == fast["demo"].format_help()


@pytest.mark.parametrize("word", TOP_LEVEL)
def test_help_and_version_import_neither_pydantic_nor_the_settings(word: str) -> None:
    code = ("import sys\n"
            "from console.cli.parser import main\n"
            f"try:\n    main([{word!r}])\nexcept SystemExit as exc:\n    code = exc.code\n"
            "heavy = [m for m in ('pydantic', 'console.settings', 'textual') if m in sys.modules]\n"
            "print('EXIT', code, 'HEAVY', ','.join(heavy) or '-')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.splitlines()[-1] == "EXIT 0 HEAVY -"
