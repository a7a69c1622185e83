"""metrics_address and the process's one metrics endpoint, scraped over HTTP."""

import math
import re
import urllib.request

import tent
from conftest import config

LISTEN = {"listen": "127.0.0.1:0"}


def scrape(address):
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=60) as reply:
        return reply.read().decode()


def samples(text, name):
    """(labels dict, value) of every sample called `name`."""
    out = []
    for line in text.splitlines():
        m = re.match(r"^" + re.escape(name) + r"(\{(.*)\})? (\S+)$", line)
        if m:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
            out.append((labels, float(m.group(3))))
    return out


def test_metrics_address_is_empty_when_off(engine):
    assert engine.metrics_address == ""


def test_engines_of_a_process_share_one_endpoint():
    with tent.TransferEngine(config(metrics=LISTEN)) as a, \
            tent.TransferEngine(config(metrics=LISTEN)) as b:
        host, port = a.metrics_address.rsplit(":", 1)
        assert host == "127.0.0.1" and int(port) > 0
        assert b.metrics_address == a.metrics_address
        text = scrape(a.metrics_address)
        engines = {labels["engine"] for labels, _ in samples(text, "tent_transferred_bytes_total")}
        assert engines == {a.segment_name, b.segment_name}
        info = samples(text, "tent_build_info")
        assert len(info) == 1 and info[0][1] == 1.0
        assert info[0][0]["version"] == tent.__version__
        for labels, value in samples(text, "tent_direct_latency_seconds_sum"):
            assert math.isfinite(value), labels
        assert "tent_lcore_busy_cycles_total" not in text
        assert samples(text, "tent_lcore_busy_seconds_total")
