"""Every metric of the package in one list, from each module's METRICS table, and the Markdown table
docs/monitoring.md shows ("What each metric is"), which its test keeps equal to this one."""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.monitoring import (
    cli,
    gpu,
    node_health,
    rdma,
    slurm,
    switch,
    training,
)

MODULES = (node_health, rdma, gpu, slurm, switch, training, cli)
HEADER = ("metric", "type", "unit", "labels", "source", "what it is")


def metrics() -> list:
    """Every Metric row, module by module in MODULES order; a name two modules declare is refused."""
    out, seen = [], {}
    for module in MODULES:
        for m in module.METRICS.values():
            if m.name in seen:
                raise ValueError(f"{m.name}: declared by {seen[m.name]} and {module.__name__}")
            seen[m.name] = module.__name__
            out.append(m)
    return out


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown() -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for m in metrics():
        cells = (f"`{m.name}`", m.type, m.unit or "-", ", ".join(m.labels) or "-", m.source, m.help)
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"
