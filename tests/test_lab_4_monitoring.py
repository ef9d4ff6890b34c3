"""Monitoring on the lab (after test_lab_2_site converged it, Slurm and the node check running): lab-node1 joins group
monitoring through a second inventory file, `playbooks/monitoring.yml` brings up Prometheus and Alertmanager there and
node_exporter with the project's collector on both nodes; then real faults fire alerts at a webhook receiver this
test runs on the lab's management network, and reset takes it all away again, packages included.

The faults: lab-node2's fabric link taken down (RdmaLlmFabricLinkDown, naming host and interface, within the rule's
`for:` plus a scrape and resolved when the link is back), and the node check drains it in Slurm meanwhile (slurmd's
HealthCheckProgram, run here at once rather than waiting for its 300 s interval: RdmaLlmSlurmNodeDrained), resumed
by the same program once the link is back. The fast settings (2 s scrapes, a 10 s link rule) keep the test short.

Not yet here: the exporters' ports refused from off the monitoring hosts (the fabric firewall does not guard them
yet), the switch ports' counters, a training run's series.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from lab import cluster
from tests.conftest import ROOT, play_recap, run, tail, tool_env
from tests.test_lab_3_train import ssh, ssh_ok

pytestmark = pytest.mark.lab

LINK_DOWN_FOR_S = 10
SETTINGS = {
    "monitoring_scrape_interval": "2s",
    "monitoring_evaluation_interval": "2s",
    "monitoring_collector_interval": "2s",
    "monitoring_alert_group_wait": "1s",
    "monitoring_alert_group_interval": "2s",
    "monitoring_rules": {"link_down_for": f"{LINK_DOWN_FOR_S}s"},
}
HEALTH = "/usr/local/sbin/rdma-node-health-slurm"


class Receiver:
    """Alertmanager's webhook (its JSON: status, alerts with labels and status), kept in order of arrival."""

    def __init__(self) -> None:
        self.posts: list[dict] = []
        received = self.posts

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # http.server's name for a POST
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                received.append({"at": time.monotonic(), **json.loads(body)})
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):  # quiet
                pass

        # The management network's gateway is this machine's address on the lab's bridge: every node reaches it.
        self.server = ThreadingHTTPServer((cluster.MGMT_GW, 0), Handler)
        self.url = f"http://{cluster.MGMT_GW}:{self.server.server_address[1]}/alerts"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def alerts(self, name: str, status: str, since: float = 0.0) -> list[dict]:
        return [
            a | {"at": p["at"]}
            for p in self.posts
            if p["at"] >= since
            for a in p.get("alerts", [])
            if a["labels"].get("alertname") == name and a["status"] == status
        ]

    def wait(self, name: str, status: str, since: float, limit: float) -> dict:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            found = self.alerts(name, status, since)
            if found:
                return found[0]
            time.sleep(0.5)
        seen = sorted({(a["labels"].get("alertname"), a["status"]) for p in self.posts for a in p.get("alerts", [])})
        raise AssertionError(f"no {status} {name} at the webhook within {limit:.0f} s; it received {seen}")


def query(expr: str) -> list[dict]:
    """Prometheus's instant query on lab-node1, asked from lab-node1 itself (its port is not published here)."""
    url = "http://127.0.0.1:9090/api/v1/query?query=" + urllib.parse.quote(expr)
    proc = ssh_ok(
        "lab-node1",
        "python3",
        "-c",
        f"'import urllib.request,sys; sys.stdout.write(urllib.request.urlopen(\"{url}\").read().decode())'",
    )
    return json.loads(proc.stdout)["data"]["result"]


def wait_series(expr: str, count: int = 1, limit: float = 60) -> list[dict]:
    """The query's series once there are `count` of them (a target's first scrape, a collector's first run), or what
    it returns at the deadline."""
    deadline = time.monotonic() + limit
    while True:
        found = query(expr)
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(2)


def monitoring(inventory: Path, playbook: str, *extra: str) -> str:
    proc = run(
        ["ansible-playbook", "-i", str(ROOT / "inventory" / "lab"), "-i", str(inventory), f"playbooks/{playbook}",
         *extra],
        timeout=900,
        env=tool_env(),
    )  # fmt: skip
    assert proc.returncode == 0, tail(proc)
    return proc.stdout


def test_prometheus_sees_the_lab_and_real_faults_fire_their_alerts(lab_cluster, tmp_path: Path) -> None:
    receiver = Receiver()
    inventory = tmp_path / "monitoring.yml"
    inventory.write_text(
        json.dumps(
            {
                "all": {
                    "children": {"monitoring": {"hosts": {"lab-node1": {}}}},
                    "vars": SETTINGS | {"monitoring_receiver_url": receiver.url},
                }
            }
        )
    )
    try:
        out = monitoring(inventory, "monitoring.yml")
        assert set(play_recap(out)) == {"lab-node1", "lab-node2"}, out[-3000:]

        # Every node scraped under its inventory name, with the project's own readings: the node check's verdict
        # (its last result, from site.yml's run), Slurm from the controller, and no GPU said so.
        up = wait_series('up{job="node"} == 1', 2)
        assert sorted(s["metric"]["instance"] for s in up) == ["lab-node1", "lab-node2"], up
        verdicts = wait_series("rdma_llm_node_check_verdict", 2)
        assert sorted(s["metric"]["instance"] for s in verdicts if s["value"][1] in ("0", "1")) == [
            "lab-node1",
            "lab-node2",
        ], verdicts
        assert [s["value"][1] for s in wait_series('rdma_llm_slurm_up{instance="lab-node1"}')] == ["1"]
        assert sorted(s["metric"]["instance"] for s in wait_series("rdma_llm_gpu_present == 0", 2)) == [
            "lab-node1",
            "lab-node2",
        ]
        fabric = wait_series(f'node_network_up{{device="{cluster.FABRIC_IFNAME}"}} == 1', 2)
        assert len(fabric) == 2, fabric

        # The fault: lab-node2's fabric link down; the node check (slurmd's health program) drains it.
        t0 = time.monotonic()
        ssh_ok("lab-node2", "ip", "link", "set", cluster.FABRIC_IFNAME, "down")
        try:
            ssh("lab-node2", HEALTH)  # exits non-zero: the node fails, and is drained
            link = receiver.wait("RdmaLlmFabricLinkDown", "firing", t0, LINK_DOWN_FOR_S + 40)
            drained = receiver.wait("RdmaLlmSlurmNodeDrained", "firing", t0, 40)
        finally:
            t1 = time.monotonic()
            ssh_ok("lab-node2", "ip", "link", "set", cluster.FABRIC_IFNAME, "up")
        fired_after = link["at"] - t0
        print(f"link down -> RdmaLlmFabricLinkDown at the webhook after {fired_after:.1f} s")
        assert link["labels"]["instance"] == "lab-node2" and link["labels"]["device"] == cluster.FABRIC_IFNAME, link
        # Not before the rule's for: (the alert is held pending), and within it plus two scrapes and the grouping.
        assert LINK_DOWN_FOR_S <= fired_after <= LINK_DOWN_FOR_S + 20, fired_after
        assert drained["labels"]["node"] == "lab-node2", drained

        # The link back: the alert resolves; the health program passes and resumes the node; that alert resolves.
        receiver.wait("RdmaLlmFabricLinkDown", "resolved", t1, 40)
        deadline = time.monotonic() + 60
        while ssh("lab-node2", HEALTH).returncode != 0 and time.monotonic() < deadline:
            time.sleep(3)  # the fabric address and route come back with the carrier
        receiver.wait("RdmaLlmSlurmNodeDrained", "resolved", t1, 60)
        state = ssh_ok("lab-node1", "sinfo", "--noheader", "--node=lab-node2", "--format=%T").stdout.strip()
        assert state in ("idle", "mixed", "allocated"), state
    finally:
        ssh("lab-node2", "ip", "link", "set", cluster.FABRIC_IFNAME, "up")
        receiver.server.shutdown()
        out = monitoring(inventory, "reset.yml", "-e", "reset_confirm=yes", "-e", "reset_packages=true",
                         "--tags", "monitoring")  # fmt: skip
    # Reset took the packages the role installed and everything it wrote.
    for host in ("lab-node1", "lab-node2"):
        script = (
            "'dpkg -l prometheus prometheus-node-exporter prometheus-alertmanager 2>/dev/null | grep ^ii;"
            " ls /usr/local/sbin/rdma-llm-metrics /var/lib/prometheus 2>/dev/null; true'"
        )
        left = ssh(host, "sh", "-c", script)
        assert left.stdout.strip() == "", f"{host}: {left.stdout}"
