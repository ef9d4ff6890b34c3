#!/usr/bin/python
"""Documentation of the action rdma_llm.cluster.train_launch_watch (plugins/action/train_launch_watch.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: train_launch_watch
short_description: Watch one host's share of a training job until it ends, a peer's ends badly, or time runs out
description:
  - Polls the host's transient unit C(train-<run_id>) (its systemd properties, the fabric link, rank 0's latest
    metrics and the worker failures torchrun logged) every O(poll_interval) seconds; a unit released after
    collection is read from C(<run_dir>/logs/unit.show).
  - Hosts tell each other through files in O(signal_dir) on the controller, so a unit that failed on one host
    ends the watch everywhere at the next poll; a host out of touch for O(lost_after) seconds is lost.
  - Never fails the task itself; the role decides the outcome for all hosts at once.
  - An action plugin used by the train_launch role; this file only documents it.
options:
  unit: {description: The job's unit on this host., type: str, required: true}
  run_dir: {description: The run's directory on this host., type: path, required: true}
  fabric_if: {description: The fabric interface whose link state is watched., type: str, required: true}
  launch_id: {description: This launch's id (its marker in the job's log)., type: str, default: ""}
  launched: {description: Epoch of the launch; 0 for a single look (train_status.yml)., type: float, required: true}
  deadline: {description: Epoch after which the watch gives up; 0 for a single look., type: float, required: true}
  poll_interval: {description: Seconds between polls., type: float, default: 10}
  lost_after: {description: Seconds out of touch after which the host is lost., type: float, default: 30}
  link_grace: {description: Seconds a fabric link may stay down before the job is failed., type: float, default: 45}
  signal_dir: {description: Controller directory where the hosts' watches meet., type: path, required: true}
  progress: {description: Print rank 0's progress line every poll., type: bool, default: false}
  hosts: {description: Number of hosts of the job (for the progress line)., type: int, default: 1}
  max_steps: {description: The run's max_steps (for the progress line)., type: int, required: true}
  nodes: {description: The job's hosts in rank order., type: list, elements: str, default: []}
  min_nodes: {description: The job may go on with this many nodes (elastic rendezvous); 0 = all., type: int, default: 0}
  hang_after:
    description:
      - Seconds without a new metrics line from rank 0 while the job runs after which every host dumps its ranks'
        stacks and states (module rdma_llm.cluster.train_hang_dump); 0 = never.
    type: float
    default: 0
  spy: {description: The py-spy executable on the hosts (the training venv's)., type: path, default: py-spy}
  lost:
    description: Hosts the launch counted lost (a later look's manifest lost_nodes); restarted since, they stay lost.
    type: list
    elements: str
    default: []
  rdzv_host:
    description: The rendezvous store's own host (train_launch_rdzv_host); empty - node rank 0's agent holds it.
    type: str
    default: ""
  engine:
    description: How the job runs - C(systemd) (a transient unit per host) or C(slurm) (a step of a Slurm job).
    type: str
    choices: [systemd, slurm]
    default: systemd
  job_id: {description: The Slurm job's id (engine slurm)., type: str, default: ""}
  queue_timeout:
    description: Seconds a Slurm job may wait in the queue, not counted against the deadline; 0 - no limit.
    type: float
    default: 0
  nodrop_prio:
    description: The no-drop priority whose PFC pause counters (C(ethtool -S)) every poll samples (cluster_nodrop_cos).
    type: int
    default: 3
author: rdma-llm-cluster maintainers (@rdma-llm-cluster)
"""

EXAMPLES = r"""
- name: Poll every host's unit once
  rdma_llm.cluster.train_launch_watch:
    unit: train-run1
    run_dir: /var/lib/rdma-llm/runs/run1
    fabric_if: rdma0
    launched: 0
    deadline: 0
    signal_dir: artifacts/run1/.status
    max_steps: 2000
"""

RETURN = r"""
job:
  description: C(host), C(state) (running, completed, failed, stopped, unreachable, missing), C(unit) (systemd's
    properties), C(ended) (epoch), C(why), C(workers) (the worker failures of this launch), C(hang) (while the
    steps stalled - C(at), C(step), C(records), each local rank's state and main thread's stack).
  type: dict
  returned: always
timed_out:
  description: The deadline passed with the job still running.
  type: bool
  returned: always
counter_samples:
  description:
    - "One sample per poll, C([epoch, {port: {counter: value}}]) - the RDMA ports' error and congestion counters
      (C(mlx5_0:1)) and the fabric interface's PFC pause counters of O(nodrop_prio) (under its name); at most 360,
      thinned evenly over a long run. Empty without an RDMA device or such counters."
  type: list
  elements: list
  returned: always
"""
