"""The simulated host's scenarios, as data: which vLLM build is installed, which draft config sits
on disk, how the server is launched, and what a checker looking at it should conclude.

The fake engine never reads `expected`: acceptance comes from what the installed build really does
with the draft config at load (see `site-packages/vllm/v1/worker/gpu_model_runner.py`). The
expectations are the oracle for tests and for colleagues writing checks against the simulator.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

SwaFlavour = Literal["pr", "upstream", "none"]
DraftFormat = Literal["native", "speculators"]
LinkStatus = Literal["pass", "fail", "unknown", "error"]

LINK_IDS = ("code-present", "fields-extracted", "runtime-activation", "config-correct")

#: The right DFlash drafter for Qwen3.6-27B (z-lab/Qwen3.6-27B-DFlash); docs/vllm-facts.md.
RIGHT_MASK_TOKEN_ID = 248070
RIGHT_TARGET_LAYER_IDS = (1, 16, 31, 46, 61)
RIGHT_LAYER_TYPES = ("sliding_attention",) * 4 + ("full_attention",)
RIGHT_SLIDING_WINDOW = 2048

#: The incident's draft config: an older export with the wrong mask token and layer ids.
WRONG_MASK_TOKEN_ID = 248064
WRONG_TARGET_LAYER_IDS = (1, 17, 33, 49, 63)
WRONG_LAYER_TYPES = ("full_attention",) * 5

PR_REVISION = "refs/pull/40898/head"
VLLM_REPO_URL = "https://github.com/vllm-project/vllm"


@dataclass(frozen=True)
class Build:
    """One installed vLLM: its version, which SWA code it carries, and how whole the install is."""

    version: str
    swa: SwaFlavour
    """`pr`: PR #40898 symbols; `upstream`: the 0.26+ symbols; `none`: no SWA code at all."""
    offset_fix: bool
    """PR #40727: capture target hidden states at `target_layer_ids + 1`."""
    copies_swa_fields: bool
    """Speculators extraction (`update_dflash`) copies the four SWA fields."""
    compiled_ext: str
    commit: str | None = None
    """Full git commit for git installs (then `direct_url.json` is written), else None."""
    requested_revision: str | None = None
    banner: Literal["logo", "server", "api_server"] = "server"
    """How the API server announces its version (the three forms vLLM has used)."""
    installer: str = "pip"
    missing: tuple[str, ...] = ()
    """Files (site-packages relative) listed in RECORD but absent on disk."""
    tampered: tuple[str, ...] = ()
    """Files whose bytes on disk differ from what RECORD says."""

    @property
    def is_git(self) -> bool:
        return self.commit is not None

    @property
    def version_tuple(self) -> tuple[int | str, ...]:
        public, _, local = self.version.partition("+")
        parts: list[int | str] = [int(p) if p.isdigit() else p for p in public.split(".")]
        if local:
            parts.append(local)
        return tuple(parts)


@dataclass(frozen=True)
class DraftSpec:
    """The draft model's config.json as a scenario puts it on disk."""

    mask_token_id: int
    target_layer_ids: tuple[int, ...]
    layer_types: tuple[str, ...]
    sliding_window: int | None = RIGHT_SLIDING_WINDOW
    format: DraftFormat = "native"


@dataclass(frozen=True, eq=False)
class Expected:
    """What a probe-only checker should conclude about this scenario (the test oracle)."""

    links: dict[str, LinkStatus]
    broken_link: str | None
    root_cause: str | None
    acceptance: float | None
    """Mean acceptance length the running server settles on; None when it does not start."""
    serve_exit: int | None = None
    """Exit status of `vllm serve` when it ends by itself (None: it keeps serving)."""
    note: str = ""


@dataclass(frozen=True)
class Scenario:
    """A named simulated host: build + draft config + launch environment + expectations."""

    name: str
    description: str
    build: Build
    draft: DraftSpec
    expected: Expected
    env: tuple[tuple[str, str], ...] = field(default=())
    """Extra environment for `vllm serve` the operator launched with."""
    serve_args: tuple[str, ...] = ()
    """Extra `vllm serve` options the operator launched with."""
    stall_after_s: float | None = None
    """The engine hangs this long after it starts serving: requests stay in flight, no token
    comes, `/health` keeps answering 200 (vllm#39863). None: it never does."""
    container: bool = False
    """The server runs as the main process of a (simulated) Docker container, started through
    the tree's `docker` stand-in (`console.sim.container`), not as a bare process."""


_PR_COMMIT = "3cfc8f8b7d1e4a2b9c6f5e0d8a7b3c2e1f4d6a95"
PR_BUILD = Build(
    version="0.1.dev16016+g3cfc8f8b7",
    swa="pr",
    offset_fix=True,
    copies_swa_fields=True,
    compiled_ext="_C.abi3.so",
    commit=_PR_COMMIT,
    requested_revision=PR_REVISION,
    banner="server",
)

RIGHT_DRAFT = DraftSpec(RIGHT_MASK_TOKEN_ID, RIGHT_TARGET_LAYER_IDS, RIGHT_LAYER_TYPES)
WRONG_DRAFT = DraftSpec(WRONG_MASK_TOKEN_ID, WRONG_TARGET_LAYER_IDS, WRONG_LAYER_TYPES)


def _links(code: LinkStatus, fields: LinkStatus, runtime: LinkStatus,
           config: LinkStatus) -> dict[str, LinkStatus]:
    return dict(zip(LINK_IDS, (code, fields, runtime, config), strict=True))


SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    Scenario(
        name="incident",
        description="PR #40898 build, wrong draft config (mask 248064, ids [1,17,33,49,63], "
                    "5x full attention): acceptance ~1.17",
        build=PR_BUILD,
        draft=WRONG_DRAFT,
        expected=Expected(
            links=_links("pass", "pass", "unknown", "fail"),
            broken_link="runtime-activation", root_cause="config-correct", acceptance=1.17,
            note="runtime-activation: aux line (2, 18, 34, 50, 64) = ids+1 and no refusal, but "
                 "the config names no sliding layers (a traced run builds 0 sliding layers)"),
    ),
    Scenario(
        name="healthy",
        description="PR #40898 build with the right draft config: acceptance ~6.4",
        build=PR_BUILD,
        draft=RIGHT_DRAFT,
        expected=Expected(
            links=_links("pass", "pass", "unknown", "pass"),
            broken_link="runtime-activation", root_cause=None, acceptance=6.4,
            note="vLLM logs nothing when it builds SWA layers: runtime-activation is unknown "
                 "until a traced restart shows layers 0-3 built with sliding_window=2048"),
    ),
    Scenario(
        name="no-swa-code",
        description="vLLM 0.24.0 wheel without SWA for DFlash, right config: sliding layers "
                    "silently run as full attention, acceptance ~3.4",
        build=Build(version="0.24.0", swa="none", offset_fix=True, copies_swa_fields=False,
                    compiled_ext="_C_stable_libtorch.abi3.so", banner="logo"),
        draft=RIGHT_DRAFT,
        expected=Expected(
            links=_links("fail", "pass", "unknown", "pass"),
            broken_link="code-present", root_cause="code-present", acceptance=3.4),
    ),
    Scenario(
        name="incomplete-build",
        description="PR #40898 build whose install is not whole (a file missing, a hash "
                    "mismatch, no compiled extension); the server still runs",
        build=replace(
            PR_BUILD, missing=("vllm/v1/attention/backends/flash_attn.py", "vllm/_C.abi3.so"),
            tampered=("vllm/model_executor/models/qwen3_dflash.py",)),
        draft=RIGHT_DRAFT,
        expected=Expected(
            links=_links("fail", "pass", "unknown", "pass"),
            broken_link="code-present", root_cause="code-present", acceptance=6.4,
            note="RECORD: flash_attn.py and _C.abi3.so missing, qwen3_dflash.py hash mismatch"),
    ),
    Scenario(
        name="fields-dropped",
        description="PR-branch build whose speculators extraction drops the SWA fields; draft "
                    "in speculators format: acceptance ~3.4",
        build=replace(
            PR_BUILD, version="0.1.dev15988+g5e2a91c04", copies_swa_fields=False,
            commit="5e2a91c04b7d3e8f1a6c2d9b0e4f7a3c8d1b5e62"),
        draft=DraftSpec(RIGHT_MASK_TOKEN_ID, RIGHT_TARGET_LAYER_IDS, RIGHT_LAYER_TYPES,
                        format="speculators"),
        expected=Expected(
            links=_links("pass", "fail", "unknown", "pass"),
            broken_link="fields-extracted", root_cause="fields-extracted", acceptance=3.4,
            note="extraction keeps mask/ids but drops layer_types, use_sliding_window, "
                 "sliding_window, max_window_layers"),
    ),
    Scenario(
        name="offset-bug",
        description="PR-branch build from before #40727: aux layers not shifted by +1, "
                    "acceptance ~2.1",
        build=replace(
            PR_BUILD, version="0.1.dev15870+g9b4d2e7a1", offset_fix=False,
            commit="9b4d2e7a1c5f8e3d6b0a2f4c7e1d9b3a5c8f2e60", banner="api_server"),
        draft=RIGHT_DRAFT,
        expected=Expected(
            links=_links("pass", "pass", "fail", "pass"),
            broken_link="runtime-activation", root_cause="runtime-activation", acceptance=2.06,
            note="code-present should warn (no +1 in dflash.py); the aux line shows "
                 "(1, 16, 31, 46, 61) instead of (2, 17, 32, 47, 62)"),
    ),
    Scenario(
        name="upstream-mixed-swa-v1-runner",
        description="vLLM 0.33.0 with the right mixed sliding/full draft, launched with "
                    "VLLM_USE_V2_MODEL_RUNNER=0 (0.33 runs the V2 model runner by default): the "
                    "engine config refuses the drafter on the V1 runner and serve exits 1",
        build=Build(version="0.33.0", swa="upstream", offset_fix=True, copies_swa_fields=True,
                    compiled_ext="_C_stable_libtorch.abi3.so", banner="logo"),
        draft=RIGHT_DRAFT,
        expected=Expected(
            links=_links("pass", "pass", "fail", "pass"),
            broken_link="runtime-activation", root_cause="runtime-activation", acceptance=None,
            serve_exit=1,
            note="the API server's engine config refuses it before any engine starts "
                 "(ValidationError: Model Runner V1 does not support: mixed sliding/full dflash "
                 "drafts); relaunched with VLLM_USE_V2_MODEL_RUNNER=1, or without the variable, "
                 "the server comes up at ~6.4. A feature the V2 runner lacks (--enable-dbo) "
                 "falls back to V1 the same way, after a warning."),
        env=(("VLLM_USE_V2_MODEL_RUNNER", "0"),),
    ),
    Scenario(
        name="stalled",
        description="The healthy host whose engine hangs 20 s after it starts serving: "
                    "/health stays 200, requests stay running, no token comes (vllm#39863)",
        build=PR_BUILD,
        draft=RIGHT_DRAFT,
        expected=Expected(
            links=_links("pass", "pass", "unknown", "pass"),
            broken_link="runtime-activation", root_cause=None, acceptance=6.4,
            note="serve.engine turns `stalled` stall_s after the hang"),
        stall_after_s=20.0,
    ),
    Scenario(
        name="container",
        description="The incident host with its server in a Docker container (`docker run "
                    "--network host`, `vllm serve` as the container's main process): found "
                    "through `docker ps`, probed with `docker exec`, restarted in place",
        build=PR_BUILD,
        draft=WRONG_DRAFT,
        expected=Expected(
            links=_links("pass", "pass", "unknown", "fail"),
            broken_link="runtime-activation", root_cause="config-correct", acceptance=1.17,
            note="the incident's verdicts, reached inside the container"),
        container=True,
    ),
)}

DEFAULT_SCENARIO = "incident"


def get_scenario(name: str) -> Scenario:
    """The scenario called `name`; KeyError naming the known ones otherwise."""
    try:
        return SCENARIOS[name]
    except KeyError:
        raise KeyError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}") from None
