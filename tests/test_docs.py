"""The README is a user's (issue 40): short, the install line and the first commands on its first
screen, no measurement history; everything else in docs/, every document listed in one index,
and no link that leads nowhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
LINK = re.compile(r"\]\(([^)\s]+)\)")
FIRST_SCREEN_LINES = 40


def test_the_readme_is_short_and_its_first_screen_starts_a_new_user() -> None:
    text = README.read_text()
    assert len(text.encode()) <= 15_000
    first = "\n".join(text.splitlines()[:FIRST_SCREEN_LINES])
    for words in ("pipx install .", "uv tool install .", "vllm-console demo", "make demo",
                  "make check", "make test"):
        assert words in first, words
    # What `make test` installs as root, said where a person decides to run it.
    for package in ("openssh-server", "tmux", "prometheus", "docker.io", "docker-compose",
                    "zsh", "fish", "/var/tmp"):
        assert package in first, package


def test_the_readme_holds_no_measurement_history() -> None:
    """Timings by date, commit hashes and test names belong to docs/ (testing, benchmarks,
    reliability, performance)."""
    text = README.read_text()
    assert not re.findall(r"\b20\d\d-\d\d-\d\d\b", text)
    assert not re.findall(r"\btest_\w+", text)
    assert not re.findall(r"\bcommit [0-9a-f]{7,}\b", text)
    assert not re.findall(r"\b\d+(?:\.\d+)? ?(?:ms|core-seconds)\b", text)


def test_one_index_lists_every_document() -> None:
    index = (DOCS / "index.md").read_text()
    listed = set(LINK.findall(index))
    for doc in sorted(DOCS.glob("*.md")):
        if doc.name != "index.md":
            assert doc.name in listed, doc.name
    assert "docs/index.md" in README.read_text()


@pytest.mark.parametrize("page", [README, *sorted(DOCS.glob("*.md"))], ids=lambda p: p.name)
def test_every_relative_link_leads_somewhere(page: Path) -> None:
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = (page.parent / target.split("#", 1)[0]).resolve()
        assert path.exists(), f"{page.name}: {target}"
