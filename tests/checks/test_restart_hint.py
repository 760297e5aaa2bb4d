"""How a hint says to restart: the words that work where it is read (issue 40)."""

from __future__ import annotations

from vllm_console.checks.restart_hint import HowToRestart


def test_a_hint_offers_what_the_reader_has() -> None:
    command = HowToRestart.for_host(["gpu 1", "--log", "/var/log/v.log"])
    assert command.traced() == "run `vllm-console restart 'gpu 1' --log /var/log/v.log --trace`"
    assert command.plain() == "run `vllm-console restart 'gpu 1' --log /var/log/v.log`"
    both = HowToRestart.for_host(["gpu1"], keys=True)
    assert both.traced() == "press R, or run `vllm-console restart gpu1 --trace`"
    assert both.plain() == "press r, or run `vllm-console restart gpu1`"
    keys = HowToRestart(keys=True)
    assert (keys.traced(), keys.plain()) == ("press R", "press r")
    read_only_demo = HowToRestart()
    assert "press" not in read_only_demo.traced() + read_only_demo.plain()
