"""`a` (apply the reference values to the draft config): a write in the draft's own format that
leaves it passing config-correct with no warning, shown as JSON values; and before the
restart, runtime activation says the config changed on disk, not that the link failed."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tests.app_support import SimApp, wait_until
from vllm_console.checks import Status
from vllm_console.checks.draft_diff import apply_reference, load_draft_diff
from vllm_console.checks.links.config_correct import check_invariants, compare_reference
from vllm_console.checks.profile import load_profile
from vllm_console.console.sim.configs import draft_config, target_config
from vllm_console.console.sim.scenarios import WRONG_DRAFT
from vllm_console.console.transport.local_host import LocalHost

PROFILE = load_profile("dflash-swa")
FIELDS = PROFILE.links.config_correct.compare


def _models(root: Path, *, speculators: bool) -> tuple[Path, Path]:
    target, draft = root / "target", root / "Qwen3.6-27B-DFlash"
    spec = dataclasses.replace(WRONG_DRAFT, format="speculators" if speculators else "native")
    for path, cfg in ((target, target_config()), (draft, draft_config(spec))):
        path.mkdir(parents=True)
        (path / "config.json").write_text(json.dumps(cfg, indent=2))
    return target, draft


async def test_apply_on_a_speculators_config_writes_its_format_and_leaves_no_warning(
        tmp_path: Path) -> None:
    target, draft = _models(tmp_path, speculators=True)
    before = json.loads((draft / "config.json").read_text())
    assert before["use_sliding_window"] is False  # the incident's, in speculators layout
    host = LocalHost("apply")
    diff = await load_draft_diff(host, PROFILE, str(draft), str(target))
    shown = [change.line() for change in diff.changes]
    # The speculators layout names the speculator class in `architectures`: not proposed.
    assert not any(line.startswith("architectures") for line in shown), shown
    assert all(row.field != "architectures" for row in diff.rows)
    # JSON values, as the file shows them, never Python reprs.
    assert 'layer_types: ["full_attention", "full_attention"' in " ".join(shown)
    assert "'" not in " ".join(shown)
    # What the tool would warn about afterwards is part of the write.
    assert "use_sliding_window: false -> true  (HF drops sliding_window when it is false)" \
        in shown
    await apply_reference(host, diff, FIELDS)
    after = json.loads((draft / "config.json").read_text())
    assert after["architectures"] == before["architectures"]
    assert after["speculators_model_type"] == "dflash"
    findings = check_invariants(after, target_config(), PROFILE.links.config_correct)
    findings += compare_reference(after, diff.reference_config, FIELDS)
    assert [f.message for f in findings if f.level != "ok"] == []


async def test_apply_on_a_native_config_keeps_the_nested_fields_nested(tmp_path: Path) -> None:
    target, draft = _models(tmp_path, speculators=False)
    host = LocalHost("apply")
    diff = await load_draft_diff(host, PROFILE, str(draft), str(target))
    shown = [change.line() for change in diff.changes]
    assert "dflash_config.mask_token_id: 248064 -> 248070" in shown
    await apply_reference(host, diff, FIELDS)
    after = json.loads((draft / "config.json").read_text())
    assert "mask_token_id" not in after  # where the native layout keeps it: dflash_config
    findings = check_invariants(after, target_config(), PROFILE.links.config_correct)
    assert [f.message for f in findings if f.level != "ok"] == []


@pytest.mark.programs
async def test_after_apply_before_the_restart_runtime_says_restart_to_apply(
        tmp_path: Path) -> None:
    """The incident on the sim: `a` writes the right config; the running engine still has the
    old one. Runtime activation must not fail (and be blamed) for what a restart will fix."""
    sim = SimApp(tmp_path / "host")
    try:
        session = sim.app.sessions["demo"]
        before = await session.run_checks()
        assert before.root_cause == "config-correct"
        await session.load_diff()
        await session.apply_reference()
        after = await session.run_checks()
        runtime = after.link("runtime-activation")
        assert runtime.status is Status.UNKNOWN, runtime.summary
        assert "config changed on disk since this run started; restart to apply" in \
            runtime.summary
        assert after.link("config-correct").status is Status.PASS
        assert after.root_cause is None
    finally:
        sim.close()


@pytest.mark.programs
async def test_the_apply_dialog_shows_json_values(tmp_path: Path) -> None:
    from vllm_console.console.tui.screens.confirm import ConfirmScreen

    sim = SimApp(tmp_path / "host")
    try:
        async with sim.app.run_test(size=(160, 50)) as pilot:
            screen = sim.app.screen_for("demo")
            assert screen is not None
            await wait_until(pilot, lambda: screen.diff.diff is not None, what="the diff")
            await pilot.press("a")
            await wait_until(pilot, lambda: isinstance(sim.app.screen, ConfirmScreen)
                             and sim.app.screen.focused is not None, what="the dialog")
            body = str(sim.app.screen.query_one("#confirm-body").render())
            assert 'layer_types: ["full_attention"' in body
            assert "'full_attention'" not in body
            assert "dflash_config.mask_token_id: 248064 -> 248070" in body
            await pilot.press("escape")
    finally:
        sim.close()
