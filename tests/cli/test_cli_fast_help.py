"""`vllm-console --help` and `--version` without the settings model: the top level's text is the
full parser's, and they import neither pydantic nor the settings (they took ~0.6 s on a busy
machine when the parser was built from the models first). Nor does `vllm-console --url URL`
before its first frame."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_console.console.cli.parser import (
    _normalise,
    build_parser,
    parser_for,
    subcommands,
    url_alone,
)

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


def run_main_in_a_fresh_interpreter(words: list[str], **env: str) -> list[str]:
    """What `vllm-console WORDS` prints, then `EXIT <status> HEAVY <the heavy modules it
    imported, or ->`."""
    code = ("import sys\n"
            "from vllm_console.console.cli.parser import main\n"
            f"try:\n    code = main({words!r})\nexcept SystemExit as exc:\n    code = exc.code\n"
            "heavy = [m for m in ('pydantic', 'vllm_console.console.settings', 'textual')\n"
            "         if m in sys.modules]\n"
            "print('EXIT', code, 'HEAVY', ','.join(heavy) or '-')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env={**os.environ, **env})
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.mark.programs
@pytest.mark.parametrize("word", TOP_LEVEL)
def test_help_and_version_import_neither_pydantic_nor_the_settings(word: str) -> None:
    assert run_main_in_a_fresh_interpreter([word])[-1] == "EXIT 0 HEAVY -"


@pytest.mark.programs
def test_a_json_fleet_run_imports_no_textual(tmp_path: Path) -> None:
    """`fleet --json` (for scripts and cron) loaded Textual for its theme check with no theme
    asked for: 0.2 s of a 0.8 s run."""
    hosts = tmp_path / "hosts.toml"
    hosts.write_text("")
    code = ("import sys\n"
            "from vllm_console.console.cli.parser import main\n"
            f"code = main(['fleet', '--json', '--config', {str(hosts)!r}])\n"
            "print('EXIT', code, 'TEXTUAL', 'textual' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert "no Prometheus" in done.stderr
    assert done.stdout.splitlines()[-1] == "EXIT 2 TEXTUAL False"


URL_ALONE = [["--url", "http://127.0.0.1:8000"], ["tui", "--url=http://127.0.0.1:8000"],
             ["--theme", "vllm-light", "--url", "http://127.0.0.1:8000"]]


@pytest.mark.parametrize("words", URL_ALONE)
def test_a_url_alone_reads_as_the_full_parser_reads_it(words: list[str]) -> None:
    assert url_alone(words)
    full = build_parser()
    fast, slow = (p.parse_args(_normalise(words, p)) for p in (parser_for(words), full))
    assert (fast.command, fast.host, fast.url, fast.theme, fast.config) == (
        slow.command, slow.host, slow.url, slow.theme, slow.config)


@pytest.mark.parametrize("words", [["--url"], ["--url", "http://h:1", "--log", "/x.log"],
                                   ["gpu1", "--url", "http://h:1"], ["status", "--url", "u"],
                                   ["--url", "http://h:1", "--help"], ["--theme", "x"]])
def test_anything_more_than_a_url_gets_the_whole_command_line(words: list[str]) -> None:
    assert not url_alone(words)
    assert "--log" in subcommands(parser_for(words))["tui"]._option_string_actions


@pytest.mark.programs
def test_the_url_consoles_first_frame_needs_no_settings_models() -> None:
    """`vllm-console --url URL` draws its first frame before the URL session is made; what it
    imports until then is its start-up time. The hosts file's models (pydantic: 0.11-0.14 s of
    the ~0.5 s to the first screen) were among it, for a command that reads no hosts file."""
    code = ("import sys\n"
            "from vllm_console.console.cli import parser\n"
            "words = ['--url', 'http://127.0.0.1:8000', '--theme', 'vllm-light']\n"
            "p = parser.parser_for(words)\n"
            "args = p.parse_args(parser._normalise(words, p))\n"
            "import vllm_console.console.cli.commands.tui as tui, vllm_console.console.tui.app\n"
            "tui.url_pending(args.url, args.url)\n"
            "print(sorted(m for m in ('pydantic', 'vllm_console.console.settings')\n"
            "             if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.programs
def test_completing_a_host_name_imports_neither_pydantic_nor_the_settings(tmp_path: Path) -> None:
    """Every Tab where a host name goes runs `vllm-console completion hosts`; with the settings'
    models (pydantic) that cost a quarter of a second of CPU, felt at each Tab."""
    hosts = tmp_path / "hosts.toml"
    hosts.write_text('[hosts.gpu1]\nssh = "u@h"\n\n[hosts."lab b"]\nlocal = true\n')
    assert run_main_in_a_fresh_interpreter(
        ["completion", "hosts", "--config", str(hosts)], HOME=str(tmp_path)) == [
            "gpu1", "lab b", "EXIT 0 HEAVY -"]


@pytest.mark.parametrize("words", [["completion", "hosts"], ["completion", "bash"],
                                   ["completion", "hosts", "--config", "/x.toml"],
                                   ["completion", "--config=/x.toml", "fish"]])
def test_completion_reads_its_words_as_the_full_parser_reads_them(words: list[str]) -> None:
    full = build_parser()
    fast, slow = (p.parse_args(_normalise(words, p)) for p in (parser_for(words), full))
    assert vars(fast) == vars(slow)
