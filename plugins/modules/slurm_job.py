#!/usr/bin/python
"""Module rdma_llm.cluster.slurm_job: the launch's Slurm commands on the submit host (sbatch, scancel, squeue,
scontrol), read and decided by module_utils/launch/slurm_job.py."""

from __future__ import annotations

DOCUMENTATION = r"""
module: slurm_job
short_description: Submit, look at or cancel a training launch's Slurm job
description:
  - C(survey) reads every Slurm node (C(scontrol show nodes --oneliner)) and the jobs Slurm still holds under
    O(name) (C(squeue --name)). Read-only.
  - C(submit) runs C(sbatch --parsable) on O(script) and returns the job id; a refusal fails with sbatch's words.
  - C(show) returns Slurm's record of job O(job_id) (C(scontrol show job)); empty once Slurm forgot it. Read-only.
  - C(cancel) stops job O(job_id) as the systemd engine stops its units - C(scancel --signal=TERM) (the step hands
    it to torchrun, the payload checkpoints), after O(grace) seconds C(scancel) (Slurm's SIGTERM, then SIGKILL after
    KillWait) - and waits for the job to end. A pending job is cancelled at once; an ended one is left alone.
  - C(record) writes Slurm's records of job O(job_id) into the directory O(dest) - C(slurm-job-<id>.show)
    (C(scontrol show job)) and, where accounting keeps jobs, C(slurm-job-<id>.sacct) (C(sacct --parsable2), the job
    and its steps; for an ended job read again up to O(wait) seconds until slurmdbd shows its end) - for
    train_status.yml once Slurm forgot the job. Writes only those two files.
options:
  action:
    description: What to do.
    type: str
    required: true
    choices: [survey, submit, show, cancel, record]
  name:
    description: The job name (C(train-<run_id>)) for C(survey).
    type: str
    default: ""
  script:
    description: The batch script on this host for C(submit).
    type: path
  job_id:
    description: The job for C(show), C(cancel) and C(record).
    type: str
  dest:
    description: The directory C(record) writes into (the run's logs directory).
    type: path
  wait:
    description: Seconds C(record) waits for slurmdbd to show the end of an ended job.
    type: int
    default: 10
  grace:
    description: Seconds between the first SIGTERM and C(scancel).
    type: int
    default: 30
  kill_wait:
    description: Seconds to wait for the job to end after C(scancel) (Slurm's KillWait is 30 s by default).
    type: int
    default: 60
author: rdma-llm-cluster maintainers (@rdma-llm-cluster)
"""

EXAMPLES = r"""
- name: Submit the batch script
  rdma_llm.cluster.slurm_job:
    action: submit
    script: /var/lib/rdma-llm/runs/run1/sbatch-20261126-130000.sh

- name: Cancel the job (SIGTERM first)
  rdma_llm.cluster.slurm_job:
    action: cancel
    job_id: "12"
    grace: 30
"""

RETURN = r"""
job_id:
  description: The submitted job's id (C(submit)).
  type: str
  returned: when action is submit
nodes:
  description: C(scontrol show nodes --oneliner) (C(survey)).
  type: str
  returned: when action is survey
queue:
  description: The jobs named O(name) Slurm holds, each C(id), C(state), C(reason), C(start), C(nodes) (C(survey)).
  type: list
  returned: when action is survey
job:
  description: Slurm's record of the job as Key -> Value (C(show)); empty once Slurm forgot it.
  type: dict
  returned: when action is show
state:
  description: The job's last state (C(cancel)); C(gone) when Slurm has no record of it.
  type: str
  returned: when action is cancel
steps:
  description: What C(cancel) did, in order.
  type: list
  returned: when action is cancel
saved:
  description: C(slurm-job-<id>.show) was written (Slurm still held the job).
  type: bool
  returned: when action is record
accounted:
  description: C(slurm-job-<id>.sacct) was written (accounting keeps the job).
  type: bool
  returned: when action is record
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import slurm_job as S


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "action": {"type": "str", "required": True, "choices": ["survey", "submit", "show", "cancel", "record"]},
            "name": {"type": "str", "default": ""},
            "script": {"type": "path"},
            "job_id": {"type": "str"},
            "grace": {"type": "int", "default": 30},
            "kill_wait": {"type": "int", "default": 60},
            "dest": {"type": "path"},
            "wait": {"type": "int", "default": 10},
        },
        required_if=[
            ("action", "submit", ["script"]),
            ("action", "show", ["job_id"]),
            ("action", "cancel", ["job_id"]),
            ("action", "record", ["job_id", "dest"]),
        ],
        supports_check_mode=True,
    )
    p = module.params

    def run(argv: list[str]) -> tuple[int, str, str]:
        return module.run_command(argv)

    try:
        if p["action"] == "survey":
            module.exit_json(changed=False, nodes=S.nodes(run), queue=S.queue(run, p["name"]) if p["name"] else [])
        if p["action"] == "show":
            module.exit_json(changed=False, job=S.show_job(run, p["job_id"]))
        if module.check_mode:
            # record too: a dry run writes no file.
            module.exit_json(changed=True, msg=f"check mode: {p['action']} not run")
        if p["action"] == "submit":
            module.exit_json(changed=True, **S.submit(run, p["script"]))
        if p["action"] == "record":
            # Bookkeeping beside the logs, not a change to the host's state.
            module.exit_json(changed=False, **S.record(run, p["job_id"], p["dest"], p["wait"]))
        module.exit_json(**S.cancel(run, p["job_id"], p["grace"], p["kill_wait"]))
    except RuleError as e:
        module.fail_json(msg=str(e))


if __name__ == "__main__":
    main()
