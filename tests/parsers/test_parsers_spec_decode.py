"""SpecDecoding lines in every known format, and the aux-layer line."""

from __future__ import annotations

import pytest

from vllm_console.console.parsers import (
    SpecDecodeSample,
    format_spec_decode,
    parse_aux_layers,
    parse_spec_decode,
)

CURRENT = (
    "SpecDecoding metrics: Mean acceptance length: 2.63, Accepted throughput: 76.80 tokens/s, "
    "Drafted throughput: 235.49 tokens/s, Accepted: 768 tokens, Drafted: 2355 tokens, "
    "Per-position acceptance rate: 0.726, 0.467, 0.240, 0.134, 0.064, "
    "Avg Draft acceptance rate: 32.6%"
)


def test_current_format() -> None:
    assert parse_spec_decode(CURRENT) == SpecDecodeSample(
        mean_acceptance_length=2.63,
        draft_acceptance_rate_pct=32.6,
        per_position=(0.726, 0.467, 0.240, 0.134, 0.064),
        accepted_tokens=768,
        drafted_tokens=2355,
        accepted_throughput=76.80,
        drafted_throughput=235.49,
    )


def test_fifteen_positions_for_dflash() -> None:
    rates = ", ".join(f"{0.9 - i * 0.05:.3f}" for i in range(15))
    sample = parse_spec_decode(
        f"SpecDecoding metrics: Mean acceptance length: 6.41, Per-position acceptance rate: {rates}"
    )
    assert sample is not None
    assert len(sample.per_position) == 15
    assert sample.per_position[0] == 0.9


def test_older_format_draft_rate_first() -> None:
    assert parse_spec_decode(
        "SpecDecoding metrics: Draft acceptance rate: 38.8%, Mean acceptance length: 2.16, "
        "Accepted: 150 tokens, Drafted: 387 tokens, Per-position acceptance rate: 0.543, 0.357, "
        "0.264"
    ) == SpecDecodeSample(
        mean_acceptance_length=2.16,
        draft_acceptance_rate_pct=38.8,
        per_position=(0.543, 0.357, 0.264),
        accepted_tokens=150,
        drafted_tokens=387,
    )


def test_v0_speculative_metrics_with_fractions_invents_nothing() -> None:
    sample = parse_spec_decode(
        "Speculative metrics: Draft acceptance rate: 0.642, System efficiency: 0.598, "
        "Number of speculative tokens: 5, Number of accepted tokens: 1284, "
        "Number of draft tokens: 2000, Number of emitted tokens: 1796."
    )
    assert sample is not None
    assert sample.draft_acceptance_rate_pct == pytest.approx(64.2)
    assert sample.accepted_tokens == 1284
    assert sample.drafted_tokens == 2000
    # Derivable from the counts, but the line does not say it: not invented.
    assert sample.mean_acceptance_length is None
    assert sample.per_position == ()
    assert dict(sample.extra) == {
        "System efficiency": "0.598",
        "Number of speculative tokens": "5",
        "Number of emitted tokens": "1796",
    }


def test_appended_fields_are_kept_and_do_not_disturb() -> None:
    sample = parse_spec_decode(
        CURRENT + ", Drafts: 292, Mean draft time: 1.2 ms, Per-request p50: 2.5, 2.6"
    )
    assert sample is not None
    assert sample.mean_acceptance_length == 2.63
    assert sample.draft_acceptance_rate_pct == 32.6
    assert dict(sample.extra) == {
        "Drafts": "292",
        "Mean draft time": "1.2 ms",
        "Per-request p50": "2.5, 2.6",
    }


def test_prefixed_and_coloured_line_via_message() -> None:
    from vllm_console.console.parsers import parse_line

    line = parse_line(
        "\x1b[1;36m(APIServer pid=1)\x1b[0;0m INFO 05-14 10:02:13 [metrics.py:96] " + CURRENT
    )
    assert parse_spec_decode(line.message) == parse_spec_decode(CURRENT)


@pytest.mark.parametrize(
    "message",
    [
        "DiffusionDecoding metrics: Mean acceptance length: 3.1, Accepted: 5 tokens",
        "Engine 000: Avg prompt throughput: 1.0 tokens/s",
        "SpecDecoding is enabled",
        "",
    ],
)
def test_not_spec_decode(message: str) -> None:
    assert parse_spec_decode(message) is None


def test_missing_values_become_none() -> None:
    sample = parse_spec_decode(
        "SpecDecoding metrics: Mean acceptance length: n/a, Accepted: lots, Drafted: 1.5 tokens"
    )
    assert sample == SpecDecodeSample()


def test_format_round_trip_of_the_current_line() -> None:
    sample = parse_spec_decode(CURRENT)
    assert sample is not None
    assert format_spec_decode(sample) == CURRENT


def test_to_json_matches_the_status_schema() -> None:
    sample = parse_spec_decode(CURRENT)
    assert sample is not None
    assert sample.to_json() == {
        "mean_acceptance_length": 2.63,
        "draft_acceptance_rate_pct": 32.6,
        "per_position": [0.726, 0.467, 0.240, 0.134, 0.064],
        "accepted_tokens": 768,
        "drafted_tokens": 2355,
    }


@pytest.mark.parametrize(
    ("message", "layers"),
    [
        (
            "Using auxiliary layers from speculative config: (2, 17, 32, 47, 62)",
            (2, 17, 32, 47, 62),
        ),
        ("Using Eagle3 auxiliary layers from config: (2, 10, 18, 26, 34)", (2, 10, 18, 26, 34)),
        ("Using auxiliary layers from speculative config: [1, 16, 31]", (1, 16, 31)),
        ("Using auxiliary layers from speculative config: (7,)", (7,)),
        ("Using auxiliary layers from speculative config: ()", ()),
    ],
)
def test_aux_layers(message: str, layers: tuple[int, ...]) -> None:
    assert parse_aux_layers(message) == layers


@pytest.mark.parametrize(
    "message",
    [
        "Using auxiliary layers from speculative config: none",
        "Using auxiliary layers from speculative config: (" + "9" * 5000 + ")",
        "auxiliary layers",
        "",
    ],
)
def test_not_aux_layers(message: str) -> None:
    assert parse_aux_layers(message) is None
