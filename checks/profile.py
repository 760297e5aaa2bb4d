"""Profiles: the chain as data (TOML), shipped in `checks/profiles/` or loaded from a path.

A profile names its four links (ids fixed by the contract), the probe each runs and its
parameters, each link's prerequisites (for the root cause), the reference configs per drafter,
and the functions a traced restart should watch (`watch`, `module:qualname` each; see
`checks.trace` for the line format the trace emits).

Symbol specs (code-present `variants[].symbols`), checked on the source with `ast`:

- `NAME` — defined at module level (def, class, assignment or import);
- `Class.method(param)` / `func(param)` — that function takes a parameter `param`;
- `func:'text'` — the string literal `text` appears inside function `func`;
- `~word` — the identifier `word` appears anywhere in the file.

A profile's `kind` says which built-in judgement its links use (DFlash with or without SWA,
EAGLE-3, a draft model, n-gram, MTP), `methods` which of vLLM's speculative methods it judges (the
chain picks the profile from the running engine's method), and `acceptance` the mean acceptance
length the method reaches when it works, with its source (the spec pane, the fleet table and
runtime activation flag a value far below it).

Unknown keys are an error naming the key, like the hosts file.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from vllm_console.checks.models import LINK_IDS
from vllm_console.console.hostside import vocabulary

DEFAULT_PROFILE = "dflash-swa"
AUTO = "auto"
"""`--profile auto` (the default): the chain picks the profile from the engine's method."""
KINDS = ("dflash-swa", "dflash", "eagle3", "draft-model", "ngram", "mtp")
"""The built-in judgements a profile's links can use."""


class ProfileError(Exception):
    """A profile cannot be found or is not valid; the message names the file and the key."""


class _Strict(BaseModel):
    # The fields' docstrings document the TOML keys for a reader of this file; nothing reads
    # them at run time, and `use_attribute_docstrings` re-parsed this module's source once per
    # model class (~30 ms of CPU before the console's first frame: the spec pane needs
    # `Acceptance`).
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class CodeVariant(_Strict):
    """One accepted way of having the code (e.g. the PR branch, or upstream)."""

    name: str
    """Shown in the evidence, e.g. `PR #40898 branch`."""
    file: str
    """Source file relative to the package directory."""
    symbols: tuple[str, ...]
    """Symbol specs that must all be present (see the module docstring)."""


class OffsetCheck(_Strict):
    """A source pattern that shows a fix is there; not finding it is a warning only."""

    name: str
    """Shown in the evidence, e.g. `PR #40727 layer offset`."""
    files: tuple[str, ...]
    """Candidate files relative to the package directory (the place moves between versions)."""
    pattern: str
    """A regular expression matched line by line."""


class LinkSpec(_Strict):
    """What every link has."""

    title: str
    """Shown next to the link id."""
    probe: str
    """The built-in probe that gathers this link's evidence."""
    requires: tuple[str, ...] = ()
    """Links that must pass before this one can be the root cause."""


class CodePresentSpec(LinkSpec):
    """Code present: the install, its version, its symbols."""

    probe: str = "code-present"
    package: str = "vllm"
    """The import package whose source is read."""
    distribution: str = "vllm"
    """The distribution whose RECORD is verified."""
    compiled: tuple[str, ...] = ()
    """Compiled extensions (package-relative); at least one must be present."""
    requires_modules: tuple[str, ...] = ()
    """Modules the package needs at import time; one missing makes the link an error."""
    variants: tuple[CodeVariant, ...] = Field(min_length=1)
    """Accepted variants; the link passes when one has all its symbols."""
    offset: OffsetCheck | None = None
    """An optional fix looked for in the source (warning when not found)."""
    verify_record: bool = True
    """Hash every RECORD entry (the install is whole) or only check presence."""


class FieldsExtractedSpec(LinkSpec):
    """Fields extracted: the config vLLM builds from the draft keeps these fields (probe
    `fields-extracted`), or, for a method without a draft config (n-gram), the engine's own
    speculative config carries what the launch asked for (probe `speculative-config`)."""

    probe: Literal["fields-extracted", "speculative-config"] = "fields-extracted"
    fields: tuple[str, ...] = ()
    """Fields that must survive the host's own extraction."""
    format_key: str = "speculators_model_type"
    """A draft config with this key is in the speculators format (else native)."""
    extractor: str = ""
    """`module:qualname` of the host's extraction function (called with the config dict)."""
    static_source: str = ""
    """Source of the per-algorithm updaters, read statically as a labelled fallback."""


class Refusal(_Strict):
    """A log message that means vLLM refused to run the drafter's layers."""

    pattern: str
    """A regular expression searched in the message."""
    hint: str
    """What to do about it."""


class RuntimeActivationSpec(LinkSpec):
    """Runtime activation: the current run of the serve log."""

    probe: str = "runtime-activation"
    start_markers: tuple[str, ...] = vocabulary.RUN_MARKERS
    """Text of the lines that mark runs (restart marker, banner, arguments, engine line; by
    default the host side's vocabulary, which shipped profiles use): the log probe reads from
    a little before the last of them. Which line begins the current run is the console's one
    rule (`console.telemetry.startup.current_run_start`)."""
    ready_markers: tuple[str, ...] = (vocabulary.READY_LINE,)
    """Text that marks the end of start-up (scanning stops there)."""
    keywords: tuple[str, ...] = ()
    """Lines of the current run containing any of these are brought back for the link."""
    refusals: tuple[Refusal, ...] = ()
    """Messages that mean vLLM refused the drafter's attention layout."""
    failures: tuple[str, ...] = ()
    """Messages that mean the engine did not start, or died."""
    loaded: tuple[str, ...] = ()
    """Messages that show the drafter was built or loaded (positive evidence; kinds other than
    `dflash-swa`, whose layers only a traced run shows)."""
    tail_keywords: tuple[str, ...] = ("SpecDecoding metrics", "EngineDeadError",
                                      "Traceback (most recent call last)", "Error")
    """Lines looked for in the log's last part, past the end of start-up: an engine that died
    on its first request, and the latest acceptance."""


class ConfigCorrectSpec(LinkSpec):
    """Config correct: the draft config against its reference and invariants."""

    probe: str = "config-correct"
    compare: tuple[str, ...]
    """Fields compared with the reference (normalised: `dflash_config` keys are folded in)."""
    layer_type_values: tuple[str, ...] = ("full_attention", "sliding_attention")
    """Valid `layer_types` values."""
    sliding_value: str = "sliding_attention"
    """The `layer_types` value that needs a window."""
    limits: Mapping[str, Limit] = Field(default_factory=dict)
    """Sane ranges for speculative-config numbers (n-gram: `prompt_lookup_min`, ...)."""
    eagle3_architectures: tuple[str, ...] = ()
    """Architectures that are EAGLE-3 heads (kind `eagle3`)."""
    mtp_fields: tuple[str, ...] = ()
    """Target config fields that count its MTP layers (kind `mtp`), first found wins."""


class Limit(_Strict):
    """A sane range for one number, and why."""

    min: int
    max: int
    why: str = ""


class Acceptance(_Strict):
    """The mean acceptance length (tokens per verification step, the bonus token included) a
    working drafter of this kind reaches, and where that figure comes from."""

    low: float
    """Below this, the drafter is not doing its job (flagged)."""
    high: float
    """What a well-matched drafter reaches on favourable traffic."""
    source: str
    """Where the range comes from (a paper, a model card, a measurement)."""
    workload_bound: bool = False
    """Acceptance depends on the traffic more than on the setup (n-gram): a low value is
    reported as such, never as a fault."""

    def describe(self) -> str:
        return f"{self.low:g}-{self.high:g} ({self.source})"

    def is_low(self, value: float | None) -> bool | None:
        """The one rule for "acceptance is low" (the chain, the spec pane, both fleets):
        below the range's low end. None when there is no figure."""
        return None if value is None else value < self.low


class ReferenceSpec(_Strict):
    """A reference draft config for one drafter."""

    name: str
    """The drafter's hub name, e.g. `z-lab/Qwen3.6-27B-DFlash`."""
    file: str
    """The reference config.json, relative to the profile file."""
    aliases: tuple[str, ...] = ()
    """Other directory names that mean this drafter."""


class LinksSpec(_Strict):
    """The four links, by their fixed ids."""

    code_present: CodePresentSpec = Field(alias="code-present")
    fields_extracted: FieldsExtractedSpec = Field(alias="fields-extracted")
    runtime_activation: RuntimeActivationSpec = Field(alias="runtime-activation")
    config_correct: ConfigCorrectSpec = Field(alias="config-correct")

    def by_id(self) -> dict[str, LinkSpec]:
        """The link specs keyed by link id, in chain order."""
        return {
            "code-present": self.code_present,
            "fields-extracted": self.fields_extracted,
            "runtime-activation": self.runtime_activation,
            "config-correct": self.config_correct,
        }


class Profile(_Strict):
    """A whole profile."""

    name: str
    """The profile's name (`--profile NAME`)."""
    title: str = ""
    """One line saying what it verifies."""
    kind: Literal["dflash-swa", "dflash", "eagle3", "draft-model", "ngram", "mtp"] = \
        "dflash-swa"
    """Which built-in judgement the links use (see KINDS)."""
    methods: tuple[str, ...] = ()
    """vLLM speculative methods (`speculative_config.method`) this profile judges."""
    acceptance: Acceptance | None = None
    """The expected mean acceptance length, with its source."""
    watch: tuple[str, ...] = ()
    """Functions (`module:qualname`) a traced restart should wrap and report."""
    links: LinksSpec
    """The four links."""
    references: tuple[ReferenceSpec, ...] = ()
    """Reference draft configs, chosen by the draft's name."""
    base_dir: str = Field(default="", exclude=True)
    """Where the profile file lies (reference paths are relative to it); set by the loader."""
    auto: bool = Field(default=False, exclude=True)
    """Loaded as `auto`: the chain replaces it with the profile for the engine's method."""

    @model_validator(mode="after")
    def _requires_name_links(self) -> Profile:
        ids = set(LINK_IDS)
        for link_id, spec in self.links.by_id().items():
            for dep in spec.requires:
                if dep not in ids:
                    raise ValueError(f"links.{link_id}.requires: unknown link {dep!r}")
                if dep == link_id:
                    raise ValueError(f"links.{link_id}.requires: a link cannot require itself")
        return self

    def requires(self) -> dict[str, tuple[str, ...]]:
        """Prerequisites per link id."""
        return {link_id: spec.requires for link_id, spec in self.links.by_id().items()}

    def titles(self) -> dict[str, str]:
        """Titles per link id."""
        return {link_id: spec.title for link_id, spec in self.links.by_id().items()}


def shipped_profiles() -> list[str]:
    """Names of the profiles shipped with the package."""
    folder = resources.files("vllm_console.checks").joinpath("profiles")
    return sorted(p.name.removesuffix(".toml") for p in folder.iterdir()
                  if p.name.endswith(".toml"))


def load_profile(name_or_path: str | None = None) -> Profile:
    """A shipped profile by name, or a profile TOML file by path. Raises ProfileError.
    `auto` (or nothing) gives the default profile: callers that can, pick one per engine
    (`checks.select`)."""
    spec = name_or_path if name_or_path and name_or_path != AUTO else DEFAULT_PROFILE
    looks_like_path = "/" in spec or spec.endswith(".toml")
    if not looks_like_path:
        resource = resources.files("vllm_console.checks").joinpath("profiles", f"{spec}.toml")
        if not resource.is_file():
            raise ProfileError(f"no profile named {spec!r} (shipped: "
                               f"{', '.join(shipped_profiles())}; `auto` picks one from the "
                               "engine's speculative method; or give a path to a .toml)")
        base = Path(str(resource)).parent
        profile = _parse(resource.read_text(encoding="utf-8"), f"profile {spec}", base)
        if not name_or_path or name_or_path == AUTO:
            profile = profile.model_copy(update={"auto": True})
        return profile
    path = Path(spec).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProfileError(f"profile {path}: not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"profile {path}: cannot read: {exc}") from None
    return _parse(text, f"profile {path}", path.resolve().parent)


def method_family(method: str | None) -> str | None:
    """vLLM's speculative method names folded the way vLLM itself folds them: every
    `*_mtp` is `mtp` (vLLM 0.32 rewrites them), `ngram_gpu` is `ngram`."""
    if not method:
        return None
    method = method.strip().lower()
    if method.endswith("_mtp"):
        return "mtp"
    if method == "ngram_gpu":
        return "ngram"
    return method


@cache
def shipped_by_method() -> dict[str, tuple[str, ...]]:
    """{method: names of the shipped profiles that judge it}."""
    out: dict[str, list[str]] = {}
    for name in shipped_profiles():
        for method in load_profile(name).methods:
            out.setdefault(method, []).append(name)
    return {k: tuple(v) for k, v in out.items()}


ASSUMED_METHOD = "dflash"
"""The method assumed when an engine's is not known (the console's incident)."""


@cache  # the panes ask on every spec-decode sample: the shipped files are read once
def expected_acceptance(method: str | None, profile: str | None = None) -> Acceptance | None:
    """The expected acceptance range for an engine running `method` (None: not known,
    `ASSUMED_METHOD`) (headless: the spec pane and both fleet tables use it): the configured
    `profile`'s (a shipped name or a file) when it has one, else the shipped profile's that
    judges the method (for DFlash, the SWA one: the figure is the same)."""
    if profile and profile != AUTO:
        try:
            configured = load_profile(profile).acceptance
        except ProfileError:
            configured = None
        if configured is not None:
            return configured
    names = shipped_by_method().get(method_family(method or ASSUMED_METHOD) or "", ())
    for name in names:
        acceptance = load_profile(name).acceptance
        if acceptance is not None:
            return acceptance
    return None


def _parse(text: str, where: str, base: Path) -> Profile:
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{where}: not valid TOML: {exc}") from None
    try:
        profile = Profile.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(_describe(e) for e in exc.errors())  # type: ignore[arg-type]
        raise ProfileError(f"{where}: {problems}") from None
    return profile.model_copy(update={"base_dir": str(base)})


def _describe(err: dict[str, Any]) -> str:
    where = ".".join(str(p) for p in err.get("loc", ()))
    if err.get("type") == "extra_forbidden":
        return f"unknown key {where!r}"
    if err.get("type") == "missing":
        return f"missing key {where!r}"
    return f"{where}: {err.get('msg', 'invalid value')}" if where else str(err.get("msg"))
