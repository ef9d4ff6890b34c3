"""Monitoring on the lab (after test_lab_2_site converged it, Slurm and the node check running): lab-node1 joins group
monitoring through a second inventory file, `playbooks/monitoring.yml` brings up Prometheus and Alertmanager there and
node_exporter with the project's collector on both nodes; then real faults fire alerts at a webhook receiver this
test runs on the lab's management network, and reset takes it all away again, packages included.

The faults: lab-node2's fabric link taken down (RdmaLlmFabricLinkDown, naming host and interface, within the rule's
`for:` plus a scrape and resolved when the link is back), and the node check drains it in Slurm meanwhile (slurmd's
HealthCheckProgram, run here at once rather than waiting for its 300 s interval: RdmaLlmSlurmNodeDrained), resumed
by the same program once the link is back. The fast settings (2 s scrapes, a 10 s link rule) keep the test short.

The switch: site.yml's poll (playbooks/monitoring_switches.yml, imported by monitoring.yml) puts lab-switch's RoCE
ports into Prometheus through lab-node1's node_exporter, with the counters the emulator serves (its counters file);
the same playbook run again brings the moved counters. The firewall: once `playbooks/firewall.yml` knows the
monitoring host, node_exporter on lab-node2 refuses this machine (off the monitoring hosts) and still answers
Prometheus; firewall.yml without group monitoring puts the node's firewall back as site.yml left it.

A training run: while train.yml trains, each rank's step, tokens/s and liveness with its run_id, host and rank; after
it, its ranks not alive. The dashboards: every panel's query (monitoring/dashboards.py) returns series from this lab,
but those whose series need what the lab lacks (a GPU, an RDMA NIC's counters, a pending job), which Prometheus must
accept as queries and which the test names.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.monitoring import dashboards

from lab import cluster
from tests.conftest import ROOT, play_recap, run, tail, tool_env
from tests.test_lab_3_train import ARTIFACTS, SMALL, corpus, finish, payload, read_until, ssh, ssh_ok, start_train, stop

pytestmark = pytest.mark.lab
__all__ = ["corpus"]  # the training tests' corpus fixture, used here too
# A short run that trains long enough for the collector (every 2 s here) to see its ranks alive.
TRAIN_STEPS = 80
# Panels whose series the lab cannot have (no GPU, no RDMA NIC, no job left pending).
NOT_IN_THE_LAB = {"gpu", "rdma", "pending"}

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
    """Prometheus's instant query on lab-node1, asked from this machine (the lab's management network reaches it)."""
    url = f"http://{cluster.Node(1).mgmt_ip}:9090/api/v1/query?query=" + urllib.parse.quote(expr)
    with urllib.request.urlopen(url, timeout=30) as answer:
        return json.loads(answer.read())["data"]["result"]


def wait_series(expr: str, count: int = 1, limit: float = 60) -> list[dict]:
    """The query's series once there are `count` of them (a target's first scrape, a collector's first run), or what
    it returns at the deadline."""
    deadline = time.monotonic() + limit
    while True:
        found = query(expr)
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(2)


def sample(expr: str, want: float | None = None, limit: float = 30) -> float:
    """The value of the query's one series (once it equals `want`, when given, or at the deadline)."""
    deadline = time.monotonic() + limit
    while True:
        found = wait_series(expr, 1, limit)
        assert len(found) == 1, (expr, found)
        value = float(found[0]["value"][1])
        if want is None or value == want or time.monotonic() > deadline:
            return value
        time.sleep(1)


def monitoring(inventory: Path | None, playbook: str, *extra: str) -> str:
    extra_inventory = ["-i", str(inventory)] if inventory else []
    proc = run(
        ["ansible-playbook", "-i", str(ROOT / "inventory" / "lab"), *extra_inventory, f"playbooks/{playbook}", *extra],
        timeout=900,
        env=tool_env(),
    )
    assert proc.returncode == 0, tail(proc)
    return proc.stdout


def screenshot(url: str, png: Path) -> int:
    """Prometheus's graph page in headless Chromium (Debian's, `make setup` installs it); the count of its saturated
    pixels, which the graph's lines are and its white page and grey text are not."""
    import numpy
    from PIL import Image

    chromium = shutil.which("chromium")
    assert chromium, "chromium is missing: run `make setup` (lab host-packages installs it)"
    done = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1280,900",
         "--virtual-time-budget=15000", f"--screenshot={png}", url],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0 and png.stat().st_size > 0, done.stderr[-2000:]
    rgb = numpy.asarray(Image.open(png).convert("RGB")).astype(int)
    return int((rgb.max(axis=2) - rgb.min(axis=2) > 80).sum())


def exporter_answers(address: str) -> bool:
    """Whether node_exporter at address:9100 takes a connection from this machine (the firewall's reset: no)."""
    try:
        with socket.create_connection((address, 9100), timeout=5):
            return True
    except ConnectionRefusedError:
        return False


def test_prometheus_sees_the_lab_and_real_faults_fire_their_alerts(lab_cluster, corpus: Path, tmp_path: Path) -> None:
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
    # The lab switch's counters as the poll reads them (the emulator re-reads this file at every show).
    counters = cluster.SWITCH_DIR / "counters.json"
    counters.write_text(json.dumps({"Ethernet1/2": {"3": {"dropped": 5, "tx-pause": 40, "ecn-marked": 7}}}))
    node2 = cluster.Node(2).mgmt_ip
    firewalled = False
    try:
        out = monitoring(inventory, "monitoring.yml")
        assert set(play_recap(out)) == {"lab-node1", "lab-node2", "lab-switch"}, out[-3000:]

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

        # The switch's two RoCE ports (one per node), through the monitoring host's node_exporter, as it counted.
        assert sample('rdma_llm_switch_up{instance="lab-node1", switch="lab-switch"}') == 1
        links = wait_series('rdma_llm_switch_port_up{switch="lab-switch"} == 1', 2)
        assert sorted(s["metric"]["port"] for s in links) == ["Ethernet1/1", "Ethernet1/2"], links
        port2 = 'switch="lab-switch", port="Ethernet1/2"'
        assert sample(f'rdma_llm_switch_port_pfc_pause_frames_total{{{port2}, direction="sent"}}') == 40
        assert sample(f'rdma_llm_switch_port_drops_total{{{port2}, qos_group="3"}}') == 5
        assert sample(f'rdma_llm_switch_port_ecn_marked_total{{{port2}, qos_group="3"}}') == 7
        assert sample('sum(rdma_llm_switch_port_drops_total{switch="lab-switch", port="Ethernet1/1"})') == 0
        # The node behind each port, from the inventory's port map: the join from a port to its node's series.
        behind = query('rdma_llm_switch_port_node_info{switch="lab-switch"}')
        assert sorted((s["metric"]["port"], s["metric"]["node"], s["metric"]["nic"]) for s in behind) == [
            ("Ethernet1/1", "lab-node1", cluster.FABRIC_IFNAME), ("Ethernet1/2", "lab-node2", cluster.FABRIC_IFNAME)
        ], behind  # fmt: skip
        # The poll again (what the controller's timer runs): the moved counters arrive, nothing else is touched.
        counters.write_text(json.dumps({"Ethernet1/2": {"3": {"dropped": 5, "tx-pause": 100, "ecn-marked": 7}}}))
        out = monitoring(inventory, "monitoring_switches.yml")
        assert {h: r["changed"] for h, r in play_recap(out).items()} == {"lab-switch": 0}, out[-3000:]
        assert sample(f'rdma_llm_switch_port_pfc_pause_frames_total{{{port2}, direction="sent"}}', 100) == 100

        # A training run on the same timeline: while it trains, each rank with its run_id, host and rank.
        run_id = f"mon-{int(time.time())}"
        play = start_train("-e", f"data={corpus}", "-e", f"steps={TRAIN_STEPS}", "-e", f"run_id={run_id}",
                           *payload(SMALL))  # fmt: skip
        try:
            read_until(play, "PLAY [Train | watch", 600)
            alive = wait_series(f'rdma_llm_train_rank_alive{{run_id="{run_id}"}} == 1', 2, 180)
            ranks = sorted((a["metric"]["rank"], a["metric"]["host"], a["metric"]["instance"]) for a in alive)
            assert ranks == [("0", "lab-node1", "lab-node1"), ("1", "lab-node2", "lab-node2")], alive
            steps = wait_series(f'rdma_llm_train_step{{run_id="{run_id}"}} > 0', 2, 120)
            tokens = wait_series(f'rdma_llm_train_tokens_per_second{{run_id="{run_id}"}} > 0', 2, 120)
            assert len(steps) == len(tokens) == 2, (steps, tokens)
            out = finish(play, 600)
        finally:
            stop(play)
        assert play.returncode == 0, out[-4000:]
        assert sample(f'sum(rdma_llm_train_rank_alive{{run_id="{run_id}"}})', 0, 60) == 0
        assert sample(f'min(rdma_llm_train_step{{run_id="{run_id}"}})') == TRAIN_STEPS

        # The run's tokens/s as Prometheus's UI draws it (from this machine, as an operator's browser): its lines
        # against the same page for a run that has no series.
        graph = f"http://{cluster.Node(1).mgmt_ip}:9090/graph?" + urllib.parse.urlencode(
            {"g0.expr": f'rdma_llm_train_tokens_per_second{{run_id="{run_id}"}}', "g0.tab": "0", "g0.range_input": "5m"}
        )
        drawn = screenshot(graph, ARTIFACTS / run_id / "tokens-per-second.png")
        empty = screenshot(graph.replace(run_id, "no-such-run"), tmp_path / "empty.png")
        print(f"screenshot: {drawn} saturated pixels with the run's series, {empty} without")
        assert drawn > empty + 500, (drawn, empty)

        # Every dashboard's every panel on this lab's data (the GPU, RDMA-counter and pending-job panels said).
        shown, lacking = [], []
        for uid in dashboards.DASHBOARDS:
            for panel in dashboards.panels(uid, {"fabric_interfaces": [cluster.FABRIC_IFNAME]}):
                found = query(dashboards.lab_query(panel.expr, {"instance": ".+", "run_id": run_id}))
                (lacking if panel.needs in NOT_IN_THE_LAB | {"drain"} else shown).append((uid, panel.title, len(found)))
        assert [s for s in shown if s[2] == 0] == [], shown
        # The run's own switch ports: ECN marks of qos-group 3 on each of its nodes' ports, lab-node2's Ethernet1/2.
        ecn = query(
            dashboards.lab_query(dashboards.run_ports("rdma_llm_switch_port_ecn_marked_total"), {"run_id": run_id})
        )
        assert {(s["metric"]["node"], s["metric"]["port"]) for s in ecn if s["metric"]["qos_group"] == "3"} == {
            ("lab-node1", "Ethernet1/1"), ("lab-node2", "Ethernet1/2")
        }, ecn  # fmt: skip
        print(f"dashboards: {len(shown)} panels with series; not in the lab: {[(u, t) for u, t, _ in lacking]}")

        # The exporters' firewall: open to anyone before the fabric firewall knows the monitoring host; then
        # lab-node2's node_exporter refuses this machine and still answers Prometheus on lab-node1.
        assert exporter_answers(node2)
        firewalled = True
        monitoring(inventory, "firewall.yml")
        assert not exporter_answers(node2)
        scraped = time.time()
        assert sample(f'timestamp(up{{job="node", instance="lab-node2"}}) > {scraped}') > scraped
        assert sample('up{job="node", instance="lab-node2"}') == 1

        # The fault: lab-node2's fabric link down; the node check (slurmd's health program) drains it.
        t0 = time.monotonic()
        ssh_ok("lab-node2", "ip", "link", "set", cluster.FABRIC_IFNAME, "down")
        try:
            ssh("lab-node2", HEALTH)  # exits non-zero: the node fails, and is drained
            link = receiver.wait("RdmaLlmFabricLinkDown", "firing", t0, LINK_DOWN_FOR_S + 40)
            drained = receiver.wait("RdmaLlmSlurmNodeDrained", "firing", t0, 40)
            # The drain panel's series, the node check's own (a rollout's or a repair's would not fire).
            panel = next(p for p in dashboards.panels("rdma-llm-slurm") if p.needs == "drain")
            held = wait_series(panel.expr, 1, 30)
            assert [s["metric"]["by"] for s in held if s["metric"]["node"] == "lab-node2"] == ["node_check"], held
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
        counters.unlink(missing_ok=True)
        if firewalled:  # the nodes' firewall as site.yml left it: no monitoring host, no exporter rule
            monitoring(None, "firewall.yml")
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
