"""widgets/checklist.py: the chain as a person reads it: what failed is red, what is only
unproven is amber and says how to prove it, and the row to look at first is one Tab away."""

from __future__ import annotations

from rich.text import Text

from tests.app_support import WidgetApp, colour_of, theme_colour
from vllm_console.checks.models import ChainReport, LinkResult, Status
from vllm_console.widgets.checklist import (
    NOT_PROVEN,
    NOT_PROVEN_READONLY,
    Checklist,
    ChecklistState,
    first_to_look_at,
    fit,
    marks,
)

IDS = ("code-present", "fields-extracted", "runtime-activation", "config-correct")


def report(*statuses: Status, broken: str | None = None, root: str | None = None,
           summary: str = "a summary") -> ChainReport:
    links = tuple(LinkResult(id=i, title=i, status=s, summary=summary, hint="a hint")
                  for i, s in zip(IDS, statuses, strict=True))
    return ChainReport(host="h", profile="p", links=links, broken_link=broken, root_cause=root)


def test_fit_cuts_only_what_does_not_fit() -> None:
    assert fit("short", 40, 1) == ["short"]
    assert fit("one two three four five six", 10, 1) == ["one two t…"]
    assert fit("one two three four five six", 10, 3) == ["one two", "three four", "five six"]
    assert fit("a  b\n c", 40, 1) == ["a b c"], "whitespace and newlines read as one space"
    path = "fix /tmp/vllm-console-demo-e_0nuckq/host/models/Qwen3.6-27B-DFlash/config.json now"
    assert fit(path, 40, 1) == [path[:39] + "…"], "a path is cut, not split at a hyphen"
    two = fit(path, 40, 2)
    joined = two[0] + two[1].removesuffix("…")
    assert joined == path[:len(joined)], "a long path goes on in the next line, no space added"
    assert two[1].endswith("…")


def test_marks_red_only_for_what_failed() -> None:
    chain = report(Status.PASS, Status.PASS, Status.UNKNOWN, Status.FAIL,
                   broken="runtime-activation", root="config-correct")
    assert marks(chain.links[2], chain) == [(NOT_PROVEN, "warn")]
    assert marks(chain.links[2], chain, readonly=True) == [(NOT_PROVEN_READONLY, "warn")], \
        "read-only: no R to press"
    assert marks(chain.links[3], chain) == [("ROOT CAUSE", "fail")]
    failed = report(Status.PASS, Status.FAIL, Status.UNKNOWN, Status.UNKNOWN,
                    broken="fields-extracted", root="fields-extracted")
    assert marks(failed.links[1], failed) == [("ROOT CAUSE", "fail"), ("broken link", "fail")]
    errored = report(Status.PASS, Status.ERROR, Status.UNKNOWN, Status.UNKNOWN,
                     broken="fields-extracted")
    assert marks(errored.links[1], errored)[0][1] == "warn"


def test_an_unproven_rows_mark_says_what_its_evidence_says() -> None:
    """Issue 40: after `a` the row said "not proven: press R" while the evidence said "config
    changed on disk since this run started; restart to apply"; a starting server's row said
    "could not probe". The mark is the evidence's reason, in a few words."""
    def unknown(**details: object) -> tuple[LinkResult, ChainReport]:
        link = LinkResult(id="runtime-activation", title="t", status=Status.UNKNOWN,
                          summary="s", hint="h", details=details)
        links = tuple(link if i == link.id else LinkResult(id=i, title=i, status=Status.PASS,
                                                           summary="", hint="")
                      for i in IDS)
        return link, ChainReport(host="h", profile="p", links=links,
                                 broken_link="runtime-activation", root_cause=None)

    link, chain = unknown(config_changed="draft/config.json was written 40 s after pid 7")
    assert marks(link, chain) == [("config changed on disk: press r to restart and apply it",
                                   "warn")]
    assert "press R" not in marks(link, chain, readonly=True)[0][0]
    link, chain = unknown(phase="starting", ready=False)
    assert marks(link, chain) == [("server starting: checked again once it is up", "warn")]
    link, chain = unknown(trace="none")
    assert marks(link, chain) == [(NOT_PROVEN, "warn")]


def test_the_first_row_to_look_at() -> None:
    assert first_to_look_at(report(Status.PASS, Status.PASS, Status.UNKNOWN, Status.FAIL,
                                   root="config-correct")) == 3
    assert first_to_look_at(report(Status.PASS, Status.PASS, Status.UNKNOWN,
                                   Status.PASS)) == 2
    assert first_to_look_at(report(Status.PASS, Status.PASS, Status.PASS, Status.PASS)) == 0


def prompt(checklist: Checklist, index: int) -> Text:
    text = checklist.get_option_at_index(index).prompt
    assert isinstance(text, Text)
    return text


async def test_rows_colours_and_details_by_layout() -> None:
    checklist = Checklist()
    app = WidgetApp(checklist)
    async with app.run_test(size=(100, 30)) as pilot:
        checklist.state = ChecklistState(report(
            Status.PASS, Status.PASS, Status.UNKNOWN, Status.FAIL, broken="runtime-activation",
            root="config-correct", summary="word " * 40))
        await pilot.pause()
        assert checklist.option_count == 4
        assert colour_of(prompt(checklist, 0), "pass") == theme_colour("status-ok")
        assert colour_of(prompt(checklist, 2), "unknown") == theme_colour("status-warn")
        assert colour_of(prompt(checklist, 3), "fail") == theme_colour("status-fail")
        assert prompt(checklist, 3).plain.count("\n") == 2, "summary and hint, one line each"
        checklist.detail_lines = 3
        await pilot.pause()
        assert prompt(checklist, 3).plain.count("\n") > 2, "a tall terminal: summaries wrap"
        checklist.detail_lines = 0
        await pilot.pause()
        assert "\n" not in prompt(checklist, 3).plain, "compact: the verdicts only"


async def test_before_and_while_running_and_on_error() -> None:
    checklist = Checklist()
    app = WidgetApp(checklist)
    async with app.run_test(size=(100, 30)) as pilot:
        checklist.state = ChecklistState()
        await pilot.pause()
        assert "not run yet: press c" in prompt(checklist, 0).plain
        checklist.state = ChecklistState(running=True)
        await pilot.pause()
        assert "running the chain" in prompt(checklist, 0).plain
        assert "running" in str(checklist.border_title)
        chain = report(Status.PASS, Status.PASS, Status.PASS, Status.PASS)
        checklist.state = ChecklistState(chain, error="host unreachable")
        await pilot.pause()
        assert checklist.option_count == 5
        last = checklist.get_option_at_index(4)
        assert last.disabled
        assert "host unreachable" in str(last.prompt)


async def test_focus_selects_the_root_cause_and_enter_asks_for_its_evidence() -> None:
    asked: list[str] = []

    class Recording(WidgetApp):
        def on_checklist_evidence_requested(self, message: Checklist.EvidenceRequested) -> None:
            asked.append(message.link.id)

    checklist = Checklist()
    app = Recording(checklist)
    async with app.run_test(size=(100, 30)) as pilot:
        app.screen.set_focus(None)
        checklist.state = ChecklistState(report(Status.PASS, Status.PASS, Status.UNKNOWN,
                                                Status.FAIL, root="config-correct"))
        await pilot.pause()
        checklist.focus()
        await pilot.pause()
        assert checklist.highlighted == 3
        assert checklist.selected_link() is not None
        await pilot.press("enter")
        await pilot.pause()
        assert asked == ["config-correct"]
