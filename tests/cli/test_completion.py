"""Shell completion as a person gets it: the script `vllm-console completion SHELL` prints,
loaded into a real bash, zsh and fish, completing subcommands, options (the generated ones
too), option values (themes, scenarios) and host names from the hosts file and
`~/.ssh/config`. zsh and fish are skipped, saying so, where they are not installed
(`apt-get install zsh fish`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.programs  # each test runs bash, zsh or fish

BIN = str(Path(sys.executable).parent)  # where `vllm-console` is installed


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A home with one host in the hosts file, aliases (and a pattern) in ssh_config and one in
    a file it includes."""
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "config").write_text(
        "Include config.d/*\nHost gpu-alias *.lab\n  HostName 10.0.0.5\nHost=gpu-eq\n  User x\n")
    (tmp_path / ".ssh" / "config.d").mkdir()
    (tmp_path / ".ssh" / "config.d" / "lab").write_text("Host gpu-included\n  Port 2222\n")
    (tmp_path / "xdg" / "vllm-console").mkdir(parents=True)
    (tmp_path / "xdg" / "vllm-console" / "hosts.toml").write_text(
        '[hosts.gpu1]\nssh = "root@10.0.0.1"\n')
    (tmp_path / "other.toml").write_text('[hosts.gpu-other]\nssh = "u@h"\n')
    return {"PATH": f"{BIN}:{os.environ['PATH']}", "HOME": str(tmp_path),
            "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "TERM": "dumb"}


def script(shell: str, env: dict[str, str], tmp_path: Path) -> Path:
    path = tmp_path / f"completion.{shell}"
    path.write_text(subprocess.run(["vllm-console", "completion", shell], env=env,
                                   capture_output=True, text=True, check=True).stdout)
    return path


# (the words typed, with the last being completed) -> what must be offered / must not be
CASES = [
    ("vllm-console ch", {"check"}, set()),
    ("vllm-console g", {"gpu1", "gpu-alias", "gpu-eq", "gpu-included"}, {"*.lab"}),
    ("vllm-console ", {"demo", "check", "status", "restart", "sim", "init", "completion",
                       "gpu1", "gpu-alias"}, set()),
    ("vllm-console check g", {"gpu1", "gpu-alias"}, {"check"}),
    ("vllm-console check --js", {"--json"}, set()),
    ("vllm-console status gpu1 --un", {"--unit"}, set()),
    ("vllm-console gpu1 --re", {"--readonly", "--reference"}, set()),
    ("vllm-console --theme vllm-d", {"vllm-dark"}, set()),
    ("vllm-console demo --scenario inc", {"incident"}, set()),
    ("vllm-console check gpu1 --profile dfl", {"dflash-swa"}, set()),
    ("vllm-console check gpu1 --profile au", {"auto"}, set()),
    ("vllm-console check --config OTHER g", {"gpu-other"}, {"gpu1"}),
    ("vllm-console completion f", {"fish"}, set()),
    ("vllm-console check gpu1 ", set(), {"gpu1"}),
]


def words_of(line: str, tmp_path: Path) -> list[str]:
    words = line.replace("OTHER", str(tmp_path / "other.toml")).split(" ")
    return words


def check_offered(offered: set[str], want: set[str], never: set[str], line: str) -> None:
    assert want <= offered, (line, offered)
    assert not never & offered, (line, offered)


def test_bash_completes_commands_options_values_and_hosts(env: dict[str, str],
                                                          tmp_path: Path) -> None:
    path = script("bash", env, tmp_path)
    shown = subprocess.run(["bash", "--norc", "--noprofile", "-c",
                            f"source {path} && complete -p vllm-console"],
                           env=env, capture_output=True, text=True, check=True).stdout
    assert shown.strip() == "complete -F _vllm_console vllm-console"
    for line, want, never in CASES:
        words = words_of(line, tmp_path)
        array = " ".join(f"'{w}'" for w in words)
        out = subprocess.run(
            ["bash", "--norc", "--noprofile", "-c",
             f"source {path}; COMP_WORDS=({array}); COMP_CWORD={len(words) - 1}; "
             "_vllm_console; printf '%s\\n' \"${COMPREPLY[@]}\""],
            env=env, capture_output=True, text=True, check=True).stdout
        check_offered(set(out.split()), want, never, line)


def test_bash_completes_files_after_a_path_option(env: dict[str, str], tmp_path: Path) -> None:
    path = script("bash", env, tmp_path)
    (tmp_path / "id_gpu").write_text("")
    out = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c",
         f"source {path}; "
         f"COMP_WORDS=(vllm-console status gpu1 --identity {tmp_path}/id_); COMP_CWORD=4; "
         "_vllm_console; printf '%s\\n' \"${COMPREPLY[@]}\""],
        env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == [f"{tmp_path}/id_gpu"]


# zsh's completion system, reduced to what it does around a bash-style function: the script's
# registration (`_comps`), bashcompinit's `_bash_complete` building COMP_WORDS/COMP_CWORD from
# `words` and `CURRENT`, and `compadd` keeping the matches that start with PREFIX.
ZSH_COMPSYS = """
compadd() {{
    while (( $# )) && [[ $1 != - ]]; do shift; done; shift
    print -l -- ${{(M)@:#$PREFIX*}}
}}
words=({words}); CURRENT={current}; PREFIX={prefix}
eval ${{_comps[vllm-console]}} || true  # 1: nothing to offer
"""


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh not installed (apt-get install zsh)")
def test_zsh_loads_the_script_and_completes(env: dict[str, str], tmp_path: Path) -> None:
    path = script("zsh", env, tmp_path)
    subprocess.run(["zsh", "-n", str(path)], env=env, check=True)
    for line, want, never in CASES:
        words = words_of(line, tmp_path)
        compsys = ZSH_COMPSYS.format(words=" ".join(f"'{w}'" for w in words),
                                     current=len(words), prefix=f"'{words[-1]}'")
        out = subprocess.run(["zsh", "-f", "-c", f"source {path}\n{compsys}"], env=env,
                             capture_output=True, text=True, check=True,
                             stdin=subprocess.DEVNULL).stdout
        check_offered(set(out.split()), want, never, line)


@pytest.mark.skipif(shutil.which("fish") is None,
                    reason="fish not installed (apt-get install fish)")
def test_fish_loads_the_script_and_completes(env: dict[str, str], tmp_path: Path) -> None:
    path = script("fish", env, tmp_path)
    subprocess.run(["fish", "--no-execute", str(path)], env=env, check=True)
    for line, want, never in CASES:
        typed = " ".join(words_of(line, tmp_path))
        out = subprocess.run(["fish", "--no-config", "-c", f"source {path}; complete -C '{typed}'"],
                             env=env, capture_output=True, text=True, check=True).stdout
        offered = {row.split("\t")[0] for row in out.splitlines()}
        check_offered(offered, want, never, line)


INTERACTIVE = {
    "bash": (["bash", "--norc", "--noprofile", "-i"], "source <(vllm-console completion bash)"),
    "zsh": (["zsh", "-f", "-i"], "source <(vllm-console completion zsh)"),
    "fish": (["fish", "--no-config", "-i"], "vllm-console completion fish | source"),
}


@pytest.mark.tmux
@pytest.mark.parametrize("shell", list(INTERACTIVE))
def test_tab_completes_in_a_real_terminal(shell: str, env: dict[str, str]) -> None:
    """What a person sees: the line loaded as docs/commands.md says, then Tab in the shell itself
    (its own completion machinery, in a tmux terminal) turns `ch` into `check` and `--js` into
    `--json`, and offers the host names."""
    from tests.tmux import Terminal

    command, load = INTERACTIVE[shell]
    if shutil.which(command[0]) is None:
        pytest.skip(f"{shell} not installed (apt-get install {shell})")
    terminal = Terminal(command, width=120, height=30, env={**env, "TERM": "xterm-256color",
                                                           "LANG": "C.UTF-8"}).start()
    try:
        terminal.keys(load, "Enter")
        terminal.keys("clear", "Enter")
        terminal.keys("vllm-console ch", "Tab")
        terminal.wait_for("vllm-console check")
        terminal.keys("gpu1 --js", "Tab")
        terminal.wait_for("vllm-console check gpu1 --json")
        terminal.keys("C-u", "vllm-console status gpu-a", "Tab")
        terminal.wait_for("vllm-console status gpu-alias")
    finally:
        terminal.stop()
