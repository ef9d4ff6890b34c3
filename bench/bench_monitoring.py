"""Monitoring's cost on the lab, measured, and projected for 32 and 1,000 nodes.

  .venv/bin/python bench/bench_monitoring.py [--hosts 8] [--window 600] [--reuse] [--keep]

Brings up a lab of --hosts hosts (a running one with --reuse, after its site.yml with the demo's monitoring
inventory), runs site.yml with lab-node1 in group monitoring (the demo's inventory, lab/cli.py), waits until
Prometheus scrapes every node, then for --window seconds lets it run and reads from Prometheus itself:
samples per scrape by job, samples appended per second, head series, each node_exporter's CPU (its own
process_cpu_seconds_total: per scrape = rate x scrape interval), Prometheus's and Alertmanager's CPU and memory,
and the data directory's growth (WAL and head chunks). The collector (rdma-llm-metrics, the node's textfile) is
timed by running its unit's command on each host; the switch poll (playbooks/monitoring_switches.yml, a timer on a
real site) by running it from here. Then Prometheus is stopped and a second one, on the same data with the admin
API, snapshots the head into a block: its chunks and index are the bytes per sample and per series a compacted
block takes (a short window compresses worse than a two-hour block: an upper bound). Prometheus is started again.

The projection is linear in what scales (each node's samples per scrape; each switch port's for the ports of one
rail per node), with everything fixed (Prometheus's own series, rule evaluation, Go's runtime) counted with the
marginal cost: an upper bound. Removes the lab it started unless --keep. Prints one report; docs/benchmarks.md has it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / ".ansible" / "collections"))  # the collection link (`make setup`)

import yaml  # noqa: E402
from ansible_collections.rdma_llm.cluster.plugins.module_utils.monitoring import server  # noqa: E402
from bench_lab import children_cpu  # noqa: E402

from lab import cli, cluster  # noqa: E402

DATA = "/var/lib/prometheus/metrics2"  # Debian's --storage.tsdb.path (its /etc/default/prometheus)
SNAPSHOT_PORT = 9098  # the second Prometheus, on lab-node1's loopback only


def ssh(host: int, script: str, timeout: float = 120) -> str:
    proc = subprocess.run(
        cluster.ssh_cmd(cluster.Node(host).mgmt_ip, script), capture_output=True, text=True, timeout=timeout
    )
    if proc.returncode != 0:
        sys.exit(f"lab-node{host}: {script[:80]}... rc {proc.returncode}: {proc.stderr[-2000:]}")
    return proc.stdout


class Prom:
    def __init__(self, url: str):
        self.url = url

    def query(self, expr: str) -> list[dict]:
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}") as r:
            body = json.load(r)
        if body["status"] != "success":
            sys.exit(f"{expr}: {body}")
        return body["data"]["result"]

    def scalar(self, expr: str) -> float:
        result = self.query(expr)
        if not result:
            sys.exit(f"no series for {expr}")
        return float(result[0]["value"][1])

    def scrape_interval(self) -> float:
        """The global scrape_interval of the configuration it runs (its own summaries are empty right after start)."""
        with urllib.request.urlopen(f"{self.url}/api/v1/status/config") as r:
            config = json.load(r)["data"]["yaml"]
        return server.duration_seconds(yaml.safe_load(config)["global"]["scrape_interval"])

    def by(self, expr: str, label: str) -> dict[str, float]:
        return {r["metric"].get(label, ""): float(r["value"][1]) for r in self.query(expr)}


def wait_for_targets(prom: Prom, hosts: int, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if len(prom.query('up{job="node"} == 1')) >= hosts:
                return
        except OSError:
            pass
        time.sleep(5)
    sys.exit(f"Prometheus did not scrape {hosts} nodes within {timeout:.0f} s")


def data_bytes() -> int:
    return int(ssh(1, f"du -sb {DATA} | cut -f1").strip())


def collector_cpu(hosts: int, runs: int = 3) -> dict[int, float]:
    """CPU seconds (user + system) of one run of the collector unit's command on each host."""
    out = {}
    for host in range(1, hosts + 1):
        command = ssh(host, "systemctl show -p ExecStart --value rdma-llm-metrics.service").strip()
        argv = command.split("argv[]=", 1)[1].split(";", 1)[0].strip()
        times = ssh(
            host, f"TIMEFORMAT='%U %S'; for i in $(seq {runs}); do time {argv} >/dev/null 2>&1; done 2>&1; true"
        )
        cpu = [sum(map(float, line.split())) for line in times.splitlines() if line.strip()]
        out[host] = min(cpu)
    return out


def switch_poll_cpu(inventories: tuple[Path, ...]) -> tuple[float, float]:
    """Wall and controller CPU seconds of one poll of every switch (playbooks/monitoring_switches.yml)."""
    cpu0, t0 = children_cpu(), time.monotonic()
    cli.playbook("monitoring_switches.yml", inventories=inventories)
    return time.monotonic() - t0, children_cpu() - cpu0


SNAPSHOT = f"""set -e
systemctl stop prometheus.service
printf 'global: {{}}\\n' > /tmp/bench-prometheus.yml
/usr/bin/prometheus --config.file=/tmp/bench-prometheus.yml --storage.tsdb.path={DATA} \\
  --web.listen-address=127.0.0.1:{SNAPSHOT_PORT} --web.enable-admin-api >/tmp/bench-prometheus.log 2>&1 &
pid=$!
for i in $(seq 60); do python3 -c 'import urllib.request as u; u.urlopen("http://127.0.0.1:{SNAPSHOT_PORT}/-/ready")' \\
  2>/dev/null && break; sleep 1; done
name=$(python3 -c 'import json, urllib.request as u
r = u.Request("http://127.0.0.1:{SNAPSHOT_PORT}/api/v1/admin/tsdb/snapshot", method="POST")
print(json.load(u.urlopen(r))["data"]["name"])')
kill $pid; wait $pid || true
for block in {DATA}/snapshots/$name/*/; do
  echo "meta $(tr -d '\\n' < $block/meta.json)"
  echo "chunks $(du -sb $block/chunks | cut -f1)"
  echo "index $(stat -c %s $block/index)"
done
rm -rf {DATA}/snapshots/$name /tmp/bench-prometheus.yml
systemctl start prometheus.service
"""


def snapshot_block() -> dict:
    """The head as one block (the admin API's snapshot): samples, series, chunks and index bytes."""
    stats = {"samples": 0, "series": 0, "chunks": 0, "index": 0}
    for line in ssh(1, SNAPSHOT, timeout=300).splitlines():
        key, _, value = line.partition(" ")
        if key == "meta":
            meta = json.loads(value)["stats"]
            stats["samples"] += meta["numSamples"]
            stats["series"] = max(stats["series"], meta["numSeries"])
        elif key in ("chunks", "index"):
            stats[key] += int(value)
    if not stats["samples"]:
        sys.exit("the snapshot holds no samples")
    return stats


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hosts", type=int, default=8)
    p.add_argument("--window", type=int, default=600, help="seconds Prometheus runs between the readings")
    p.add_argument("--reuse", action="store_true", help="the running lab, monitoring converged on it")
    p.add_argument("--keep", action="store_true", help="leave the lab up")
    args = p.parse_args()

    monitoring, url = cli.demo_monitoring()
    inventories = (monitoring,)
    started = not args.reuse
    if started:
        cluster.down()
        cluster.up(args.hosts)
        took = cli.playbook("site.yml", inventories=inventories)
        print(f"site.yml on {args.hosts} hosts with monitoring: {took:.0f} s", flush=True)
    prom = Prom(url)
    wait_for_targets(prom, args.hosts)
    interval = prom.scrape_interval()

    print(f"window: {args.window} s, scrape interval {interval:.0f} s", flush=True)
    disk0 = data_bytes()
    time.sleep(args.window)
    w = f"[{args.window}s]"
    disk1 = data_bytes()
    per_job = prom.by("sum by (job) (scrape_samples_scraped)", "job")
    per_node = prom.by('scrape_samples_scraped{job="node"}', "instance")
    duration = prom.by('scrape_duration_seconds{job="node"}', "instance")
    exporter = prom.by(f'rate(process_cpu_seconds_total{{job="node"}}{w})', "instance")
    rates = {
        "samples/s": prom.scalar(f"rate(prometheus_tsdb_head_samples_appended_total{w})"),
        "series": prom.scalar("prometheus_tsdb_head_series"),
        "prometheus cpu": prom.scalar(f'rate(process_cpu_seconds_total{{job="prometheus"}}{w})'),
        "prometheus rss": prom.scalar('process_resident_memory_bytes{job="prometheus"}'),
        "alertmanager cpu": prom.scalar(f'rate(process_cpu_seconds_total{{job="alertmanager"}}{w})'),
        "rules s/eval": prom.scalar("sum(prometheus_rule_group_last_duration_seconds)"),
    }
    switch_series = prom.scalar('count({__name__=~"rdma_llm_switch_port_.*"})')
    switch_ports = prom.scalar('count(count by (switch, port) ({__name__=~"rdma_llm_switch_port_.*"}))')
    collector = collector_cpu(args.hosts)
    defaults = yaml.safe_load((ROOT / "roles" / "monitoring" / "defaults" / "main.yml").read_text())
    collector_interval = server.duration_seconds(defaults["monitoring_collector_interval"])  # the demo keeps it
    poll_wall, poll_cpu = switch_poll_cpu(inventories)
    block = snapshot_block()
    wait_for_targets(prom, args.hosts)

    nodes = sorted(per_node, key=lambda n: int(n.removeprefix("lab-node")))
    print(
        f"\n{'node':<10} {'samples/scrape':>14} {'scrape s':>9} {'exporter CPU ms/scrape':>23} "
        f"{'collector CPU ms/run':>21}"
    )
    for n in nodes:
        host = int(n.removeprefix("lab-node"))
        print(
            f"{n:<10} {per_node[n]:14.0f} {duration[n]:9.3f} {exporter[n] * interval * 1000:23.1f} "
            f"{collector[host] * 1000:21.0f}"
        )
    plain = [per_node[n] for n in nodes[1:]]  # lab-node1 also serves the switch's file
    node_samples = sum(plain) / len(plain)
    exporter_ms = sum(exporter[n] for n in nodes) / len(nodes) * interval * 1000
    collector_ms = sum(collector.values()) / len(collector) * 1000
    per_port = switch_series / switch_ports
    print(f"\nsamples per scrape by job: {json.dumps({k: round(v) for k, v in per_job.items()})}")
    print(
        f"switch: {switch_ports:.0f} ports, {per_port:.1f} series each; "
        f"one poll {poll_wall:.1f} s, {poll_cpu:.1f} CPU s"
    )
    print(
        f"Prometheus: {rates['samples/s']:.0f} samples/s, {rates['series']:.0f} head series, "
        f"{rates['prometheus cpu'] * 1000:.1f} ms CPU/s, RSS {rates['prometheus rss'] / 2**20:.0f} MiB, "
        f"rules {rates['rules s/eval'] * 1000:.1f} ms per evaluation; "
        f"Alertmanager {rates['alertmanager cpu'] * 1000:.1f} ms CPU/s"
    )
    grow = (disk1 - disk0) / args.window
    chunk_b = block["chunks"] / block["samples"]
    index_b = block["index"] / block["series"]
    print(f"data directory: {grow:.0f} B/s written (WAL, head chunks) = {grow * 86400 / 2**20:.0f} MiB/day")
    print(
        f"snapshot block: {block['samples']} samples, {block['series']} series, chunks {chunk_b:.2f} B/sample, "
        f"index {index_b:.0f} B/series"
    )
    per_s = rates["samples/s"]
    cpu_per_ksample = rates["prometheus cpu"] / per_s * 1000
    rss_per_series = rates["prometheus rss"] / rates["series"]
    fixed = per_job.get("prometheus", 0) + per_job.get("alertmanager", 0)
    print(
        f"\n{'nodes':>6} {'samples/s':>10} {'series':>9} {'Prom CPU':>9} {'Prom RSS':>9} {'disk/day':>9} "
        f"{'poll CPU':>9}"
    )
    for n in (args.hosts, 32, 1000):
        samples = n * node_samples + n * per_port + fixed  # one RoCE port per node (one rail)
        sps = samples / interval
        disk = sps * 86400 * chunk_b + 12 * samples * index_b  # twelve 2-h blocks a day before compaction
        poll = poll_cpu * n / switch_ports / 60  # the poll's CPU per second at one poll a minute, per port
        print(
            f"{n:6d} {sps:10.0f} {samples:9.0f} {cpu_per_ksample * sps / 1000:8.3f}c "
            f"{rss_per_series * samples / 2**30:7.2f}G "
            f"{disk / 2**30:7.2f}G {poll:8.3f}c"
        )
    print(
        f"per node: {node_samples:.0f} samples/scrape, node_exporter {exporter_ms:.1f} ms CPU/scrape "
        f"({exporter_ms / interval / 10:.2f} % of a core), collector {collector_ms:.0f} ms CPU/run "
        f"({collector_ms / collector_interval / 10:.2f} % of a core)"
    )
    if started and not args.keep:
        cluster.down()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
