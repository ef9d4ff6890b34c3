#!/usr/bin/python
"""Module rdma_llm.cluster.train_hang_dump: every local rank's stacks and process state while a job's steps stall
(py-spy from the training venv), kept beside the job's logs; read by module_utils/launch/hang.py."""

from __future__ import annotations

DOCUMENTATION = r"""
module: train_hang_dump
short_description: Dump the stacks of a training job's ranks on this host while the job stalls
description:
  - Finds this host's ranks from their C(start) records in O(run_dir)C(/out/metrics.jsonl) (the latest per rank, by
    this host's name) and reads each one's process state from C(/proc) and its threads' stacks with
    C(py-spy dump --json) - native frames where py-spy may pause the process, Python frames without pausing it
    where it is stopped or in uninterruptible sleep.
  - Writes them to O(run_dir)C(/logs/hang-<launch_id>.json), which the launch collects with the job's logs.
  - Reading pauses each rank for a moment (py-spy's own pause); a job that was only slow goes on.
  - Asks each rank for PyTorch's flight recorder too (writes O(run_dir)C(/logs/.fr-request); the payload's thread
    answers with C(logs/fr-rank<rank>.json)) and adds each rank's summary (per process group, the newest collective
    issued and the oldest not finished) to its record, or none for a rank that wrote nothing in O(flight_wait)
    seconds.
options:
  run_dir:
    description: The run's directory on this host (C(out/) and C(logs/) under it).
    type: path
    required: true
  launch_id:
    description: The launch the dump belongs to (names the file).
    type: str
    required: true
  spy:
    description: The py-spy executable (the training venv's).
    type: path
    required: true
  flight_wait:
    description: Seconds to wait for the ranks' flight recorder dumps; 0 asks for none.
    type: float
    default: 5
author: rdma-llm-cluster maintainers (@rdma-llm-cluster)
"""

EXAMPLES = r"""
- name: Dump the ranks' stacks
  rdma_llm.cluster.train_hang_dump:
    run_dir: /var/lib/rdma-llm/runs/run1
    launch_id: "20261127-110000"
    spy: /opt/rdma-llm/venv/bin/py-spy
"""

RETURN = r"""
records:
  description: One per local rank - C(rank), C(pid), C(state), C(native), C(threads) (py-spy's JSON), C(error),
    C(flight) (the flight recorder's summary, or null).
  type: list
  returned: always
path:
  description: The file the records were written to (not in check mode).
  type: str
  returned: always
"""

import json
import os
import socket
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import hang


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "run_dir": {"type": "path", "required": True},
            "launch_id": {"type": "str", "required": True},
            "spy": {"type": "path", "required": True},
            "flight_wait": {"type": "float", "default": 5},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        with open(os.path.join(p["run_dir"], "out", "metrics.jsonl"), encoding="utf-8") as f:
            ranks = hang.local_ranks(f, socket.gethostname())
    except OSError as e:
        module.fail_json(msg=f"no metrics to find the ranks in: {e}")

    def run(argv: list[str]) -> tuple[int, str, str]:
        return module.run_command(argv)

    logs = os.path.join(p["run_dir"], "logs")
    stamp = f"{p['launch_id']}-{time.time():.3f}"
    if p["flight_wait"] > 0 and not module.check_mode:
        # Asked first: each rank's recorder is written while py-spy reads the stacks.
        hang.request_flight(logs, stamp)
    records = [hang.dump_rank(pid, rank, p["spy"], run) for rank, pid in ranks.items()]
    if p["flight_wait"] > 0 and not module.check_mode:
        flights = hang.read_flight(logs, ranks, stamp, p["flight_wait"])
        for record in records:
            record["flight"] = flights.get(record["rank"])
    path = os.path.join(p["run_dir"], "logs", f"hang-{p['launch_id']}.json")
    if not module.check_mode:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump({"host": socket.gethostname(), "records": records}, f)
        os.replace(path + ".tmp", path)
    module.exit_json(changed=False, records=records, path=path)


if __name__ == "__main__":
    main()
