"""What the fabric firewall (role fabric_firewall) lets through, from the inventory: one rule set per node.

Plain Python (stdlib only), the filter rdma_llm.cluster.fabric_firewall_plan, tested by
tests/unit/plugins/module_utils/host/test_firewall.py. The role renders the plan into its own nftables table
(`inet fabric_firewall`, templates/fabric-firewall.nft.j2):

- a fabric address of this node is reached on a fabric interface only (anything else is dropped: spoofed, or routed
  in from the management side), and from the cluster's fabric networks only, on every port: gloo and NCCL's socket
  transport bind the fabric address (GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME), so they are covered whatever port they
  pick;
- the project's own listening ports (the launch's rendezvous and pre-flight all-reduce, the ladder's pair tests and
  all-reduce) listen on every address, the management one included: on any address they accept fabric sources on a
  fabric interface only;
- the training processes run in one group (the launch sets it on the unit): their listening sockets answer fabric
  peers only, whatever port they picked (torch's worker store listens on a free port on every address): a SYN-ACK
  from a socket of that group to a non-fabric address is dropped on output (`meta skgid`, which nftables resolves to
  the listening socket for a SYN-ACK, on cgroup v1 and v2 alike).

- with monitoring (a host in group monitoring), the exporters' ports (node_exporter's) answer the monitoring hosts
  only, on every address: Prometheus scrapes them there, anyone else is refused.

SSH and every other service on the management network are never matched: no rule names their ports or addresses.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.qos import rdma_qos_fabric_networks
from ansible_collections.rdma_llm.cluster.plugins.module_utils.numbers import as_int


def _port_numbers(ports: list[Any]) -> list[int]:
    numbers = set()
    for port in ports or []:
        n = as_int(port)
        if n is None or not 1 <= n <= 65535:
            raise RuleError(f"fabric_firewall: port {port!r} must be an integer 1-65535")
        numbers.add(n)
    return sorted(numbers)


def scrape_addresses(sources: list[Any]) -> dict[str, list[str]]:
    """The monitoring hosts' addresses (Prometheus's sources), by family: each an IP address."""
    out: dict[str, list[str]] = {"scrape_v4": [], "scrape_v6": []}
    for source in sources or []:
        text = str(source).strip("[]")
        try:
            address = ipaddress.ip_address(text)
        except ValueError:
            raise RuleError(
                f"fabric_firewall: the monitoring host address {source!r} is no IP address: the firewall lets the "
                "exporters answer the monitoring hosts by address (set its monitoring_address or ansible_host to one)"
            ) from None
        key = "scrape_v4" if address.version == 4 else "scrape_v6"
        if str(address) not in out[key]:
            out[key].append(str(address))
    return out


def fabric_firewall_plan(
    cluster_interfaces: list[Any],
    own: list[Any],
    ports: list[Any],
    scrape_ports: list[Any] = (),
    scrape_sources: list[Any] = (),
) -> dict[str, list]:
    """The firewall of one node: `cluster_interfaces`, every node's cluster_fabric_interfaces (a list of lists, or
    one flat list); `own`, this node's; `ports`, the project's listening TCP ports; `scrape_ports`, the exporters'
    ports (none without monitoring) that answer `scrape_sources`, the monitoring hosts' addresses, only.

    Returns `fabric_v4`/`fabric_v6` (the cluster's fabric subnets and routed networks, sources to accept),
    `local_v4`/`local_v6` (this node's fabric addresses), `interfaces` (its fabric interfaces), `ports` (sorted,
    unique), `scrape_ports` and `scrape_v4`/`scrape_v6`."""
    flat: list[dict] = []
    for item in cluster_interfaces or []:
        flat += [i for i in (item if isinstance(item, list) else [item]) if isinstance(i, dict)]
    networks = rdma_qos_fabric_networks(flat)
    local: dict[str, list[str]] = {"local_v4": [], "local_v6": []}
    for iface in [i for i in own or [] if isinstance(i, dict)]:
        for cidr in iface.get("addresses") or []:
            try:
                address = ipaddress.ip_interface(cidr).ip
            except ValueError as exc:
                raise RuleError(f"fabric_firewall: {cidr!r} of {iface.get('name')} is not an address: {exc}") from exc
            key = "local_v4" if address.version == 4 else "local_v6"
            if str(address) not in local[key]:
                local[key].append(str(address))
    names = [str(i["name"]) for i in own or [] if isinstance(i, dict) and i.get("name")]
    if not names or not local["local_v4"]:
        raise RuleError(
            "fabric_firewall: this node has no fabric interface with an IPv4 address (cluster_fabric_interfaces)"
        )
    numbers, scraped = _port_numbers(ports), _port_numbers(scrape_ports)
    scrapers = scrape_addresses(scrape_sources)
    if scraped and not scrapers["scrape_v4"] + scrapers["scrape_v6"]:
        raise RuleError("fabric_firewall: the exporters' ports would answer nobody: no monitoring host address")
    both = sorted(set(numbers) & set(scraped))
    if both:
        raise RuleError(f"fabric_firewall: port {both[0]} is both a fabric-only port and an exporter's")
    return {
        "fabric_v4": networks["ipv4"],
        "fabric_v6": networks["ipv6"],
        **local,
        "interfaces": names,
        "ports": numbers,
        "scrape_ports": scraped,
        **scrapers,
    }


# Filter name -> rule (plugins/filter/fabric_firewall.py exposes them as rdma_llm.cluster.<name>).
FILTERS = {"fabric_firewall_plan": fabric_firewall_plan}
