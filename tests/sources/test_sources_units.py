"""The SSH-free sources' pure parts: Prometheus answers, selectors, URLs, and which hosts-file
entry a fleet row is (and what Enter opens)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vllm_console.console.settings import HostsFile
from vllm_console.console.sources.fleet_hosts import (
    OpenKind,
    host_part,
    hosts_by_label,
    open_target,
)
from vllm_console.console.sources.prometheus import (
    PromError,
    PromQueryError,
    check_selector,
    parse_vector,
)
from vllm_console.console.sources.web import BadUrl, split_url

JSON = st.recursive(st.none() | st.booleans() | st.floats(allow_nan=False) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=20)


@given(JSON)
def test_parse_vector_never_raises_anything_but_a_query_error(data: object) -> None:
    try:
        parse_vector({"resultType": "vector", "result": data})
        parse_vector(data)
    except PromQueryError:
        pass


def test_nan_is_kept_and_infinities_are_skipped() -> None:
    got = parse_vector({"resultType": "vector", "result": [
        {"metric": {"instance": "a"}, "value": [1, "NaN"]},
        {"metric": {"instance": "b"}, "value": [1, "+Inf"]},
        {"metric": {"instance": "c"}, "value": [1, "2.5"]},
        {"metric": {"instance": "d"}, "value": [1]}]})
    assert [s.labels["instance"] for s in got] == ["a", "c"]
    assert math.isnan(got[0].value)
    assert got[1].value == 2.5


def test_a_matrix_is_refused() -> None:
    with pytest.raises(PromQueryError, match="expected an instant vector"):
        parse_vector({"resultType": "matrix", "result": []})


@pytest.mark.parametrize("bad", ['job="vllm"', "{job='x'", "job"])
def test_selector_wants_braces(bad: str) -> None:
    with pytest.raises(PromError, match="in braces"):
        check_selector(bad)


def test_urls() -> None:
    assert split_url("http://h:8000/") == ("http", "h", 8000, "")
    assert split_url("https://prom.example/prometheus") == ("https", "prom.example", 443,
                                                            "/prometheus")
    assert split_url("http://[::1]:9090") == ("http", "::1", 9090, "")
    for bad in ("h:8000", "ftp://h", "http://", "http://h:99999", "http://h/?q=1"):
        with pytest.raises(BadUrl):
            split_url(bad)


def test_host_part() -> None:
    assert host_part("10.0.0.5:9400") == "10.0.0.5"
    assert host_part("[::1]:8000") == "::1"
    assert host_part("gpu1") == "gpu1"


def test_rows_map_to_entries_by_name_url_or_a_unique_ssh_host() -> None:
    hosts = HostsFile.model_validate({"hosts": {
        "10.0.0.9:8000": {"ssh": "u@elsewhere"},
        "gpu1": {"url": "http://10.0.0.5:8000"},
        "gpu2": {"ssh": "root@10.0.0.6"},
        "twin-a": {"ssh": "root@10.0.0.7"}, "twin-b": {"ssh": "admin@10.0.0.7:2222"}}})
    mapped = hosts_by_label(hosts, ["10.0.0.9:8000", "10.0.0.5:8000", "10.0.0.6:8000",
                                    "10.0.0.7:8000", "10.0.0.8:8000"])
    assert mapped == {"10.0.0.9:8000": "10.0.0.9:8000", "10.0.0.5:8000": "gpu1",
                      "10.0.0.6:8000": "gpu2"}  # 10.0.0.7 is two entries' host: no guess


def test_enter_opens_ssh_then_url_then_prometheus() -> None:
    hosts = HostsFile.model_validate({"hosts": {
        "gpu1": {"url": "http://10.0.0.5:8000"}, "gpu2": {"ssh": "root@10.0.0.6"},
        "gpu3": {"ssh": "root@10.0.0.7", "url": "http://10.0.0.7:8000"}}})
    assert open_target("10.0.0.6:8000", "gpu2", hosts).kind is OpenKind.SSH
    assert open_target("10.0.0.7:8000", "gpu3", hosts).kind is OpenKind.SSH
    url = open_target("10.0.0.5:8000", "gpu1", hosts)
    assert (url.kind, url.url) == (OpenKind.URL, "http://10.0.0.5:8000")
    bare = open_target("10.0.0.8:8000", None, hosts)
    assert (bare.kind, bare.url) == (OpenKind.URL, "http://10.0.0.8:8000")
    assert open_target("vllm", None, hosts).kind is OpenKind.PROMETHEUS
    assert open_target("pod/vllm-0", None, hosts).kind is OpenKind.PROMETHEUS


def test_enter_on_a_mapped_row_builds_the_ssh_console_of_that_entry(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import argparse

    from vllm_console.console.cli.commands.fleet import _session
    from vllm_console.console.session.host_session import HostSession
    from vllm_console.console.sources.fleet_hosts import OpenTarget
    from vllm_console.console.sources.url import UrlSession

    config = tmp_path / "hosts.toml"
    config.write_text('[hosts.gpu2]\nssh = "root@10.0.0.6:2222"\n[hosts.gpu2.serve]\n'
                      'url = "http://127.0.0.1:8000"\n'
                      '[hosts.gpu1]\nurl = "http://10.0.0.5:8000"\n')
    hosts = HostsFile.model_validate({"hosts": {
        "gpu2": {"ssh": "root@10.0.0.6:2222", "serve": {"url": "http://127.0.0.1:8000"}},
        "gpu1": {"url": "http://10.0.0.5:8000"}}})
    args = argparse.Namespace(config=str(config), theme=None, prometheus=None, selector=None,
                              host_label=None, json=False)
    ssh = _session(OpenTarget(OpenKind.SSH, "gpu2"), hosts, args)
    assert type(ssh) is HostSession
    assert (ssh.config.hostname, ssh.config.port, ssh.config.username) == ("10.0.0.6", 2222,
                                                                          "root")
    assert ssh.config.serve.url == "http://127.0.0.1:8000"
    url = _session(OpenTarget(OpenKind.URL, "gpu1", "http://10.0.0.5:8000"), hosts, args)
    assert isinstance(url, UrlSession)
    assert url.name == "gpu1"


@pytest.mark.parametrize(("running", "waiting", "tps", "engine"), [
    (4, 0, 0.0, "stalled"),  # requests in flight, no token in the window: a hung engine
    (0, 3, 0.0, "stalled"),
    (2, 1, 35.0, "ok"),
    (0, 0, 0.0, "idle"),
    (0, 0, 12.0, "idle"),  # the window's last tokens, the requests done by now
    (None, 0, 0.0, None),
])
def test_the_prometheus_fleet_tells_a_hung_engine_from_an_idle_one(
        running: float | None, waiting: float, tps: float, engine: str | None) -> None:
    from vllm_console.console.sources.fleet_query import FleetServer

    server = FleetServer(key="10.0.0.5:8000", running=running, waiting=waiting,
                         generation_tps=tps)
    assert server.engine == engine
    assert server.to_json()["engine"] == engine


def test_the_fleet_asks_prometheus_for_windowed_latency_quantiles() -> None:
    from vllm_console.console.sources.fleet_query import queries

    asked = queries('{job="vllm"}', "instance")
    assert asked["ttft_p99"] == (
        'histogram_quantile(0.99, sum by (instance, le) '
        '(rate(vllm:time_to_first_token_seconds_bucket{job="vllm"}[1m])))')
    assert "e2e_request_latency_seconds_bucket" in asked["e2e_p99"]
