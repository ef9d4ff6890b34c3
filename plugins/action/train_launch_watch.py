"""Watch one host's share of a training job (its transient systemd unit, or its task of the Slurm job's step)
until it ends, a peer's ends badly, the host is lost, or the deadline passes. One bounded poll loop; never fails the
task itself: the outcome is decided afterwards for all hosts at once (filter train_launch_job_outcome).

The engines differ only in what a poll reads of the host's share (module_utils/launch/poll.py poll_script): systemd's
unit properties, or the node's step record and Slurm's record of the job. A Slurm job may first wait in the queue
(`pending`): that time does not count against the deadline, up to `queue_timeout` seconds.

Hosts tell each other through files on the controller (`signal_dir/<host>.json`): a unit that failed on one
host (or a host lost for `lost_after` seconds) ends the watch everywhere at the next poll, so the role stops
the survivors at once instead of waiting for their collective timeout. With `min_nodes` (elastic rendezvous),
hosts lost for good that the job can go on without do not end it (outcome.peers_end_watch). The host that
prints progress (`progress: true`, node rank 0) shows rank 0's latest metrics line every poll.

Every poll also reads the RDMA ports' error and congestion counters (poll.SAMPLED_COUNTERS) and the fabric
interface's PFC pause counters of the no-drop priority (`nodrop_prio`): what its switch port paused, seen from the
host at the watch's pace; the samples come back in `counter_samples` for the run's fabric account
(module_utils/launch/fabric.py).

A hang: when rank 0's metrics do not move for `hang_after` seconds while the job runs, that host writes
`signal_dir/@stall.json` (no host name holds "@"); every host then dumps its ranks' stacks and states once (module
train_hang_dump, py-spy) into its job record and its logs, before the collective's own timeout (the payload's
pg_timeout) ends the job. Progress again removes the file and the dumps: a pause (an evaluation, a slow
checkpoint) was no hang. The outcome names the rank(s) the others waited for (module_utils/launch/hang.py).
"""

from __future__ import annotations

import json
import os
import time

from ansible.errors import AnsibleConnectionFailure, AnsibleError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import hang, outcome, poll, rejoin, slurm_state

display = Display()
STALL_FILE = "@stall.json"
# Counter samples a watch keeps (one per poll until then; train_fabric.py plots them).
MAX_SAMPLES = 360
# Rank 0's metrics records that are progress (payload/train.py's kinds).
PROGRESS_KINDS = ("start", "resume", "first_step", "train", "eval")


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = True

    def _poll(self, args: dict, task_vars: dict) -> tuple[dict[str, str], str, dict | None, list[dict]]:
        script = poll.poll_script(
            args["unit"],
            args["run_dir"],
            args["fabric_if"],
            args.get("launch_id", ""),
            args.get("engine", "systemd"),
            str(args.get("job_id", "")),
            int(args.get("nodrop_prio", 3)),
        )
        result = self._execute_module(
            module_name="ansible.builtin.command",
            module_args={"argv": ["sh", "-c", script]},
            task_vars=task_vars,
        )
        if result.get("unreachable"):
            raise AnsibleConnectionFailure(result.get("msg", "unreachable"))
        if result.get("rc", 1) != 0:
            raise AnsibleError(f"polling {args['unit']} failed: {result.get('stderr') or result.get('msg')}")
        self._sample(result.get("stdout", ""), args["fabric_if"])
        return poll.parse_poll(result.get("stdout", ""))

    def _sample(self, stdout: str, fabric_if: str = "") -> None:
        """Keep this poll's RDMA port and PFC pause counters with its time (the run's fabric account plots them). At
        most MAX_SAMPLES: past it every other sample goes (the first stays), so a long run keeps its whole span."""
        counters = poll.parse_poll_counters(stdout, fabric_if)
        if not counters:
            return
        self._samples.append([round(time.time(), 1), counters])
        if len(self._samples) > MAX_SAMPLES:
            self._samples[:] = self._samples[:1] + self._samples[2::2]

    def _signal(self, signal_dir: str, host: str, payload: dict) -> None:
        self._write(os.path.join(signal_dir, f"{host}.json"), payload)

    @staticmethod
    def _write(path: str, payload: dict) -> None:
        """A signal file, whole or not at all (the other hosts' watches read it at any time)."""
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(payload, f)
        os.replace(tmp, path)

    def _watch_hang(self, args: dict, task_vars: dict, job: dict, state: dict, metrics: dict | None) -> None:
        """Stall detection (the progress host) and the dump of this host's ranks once per stall (every host)."""
        hang_after = float(args.get("hang_after") or 0)
        if hang_after <= 0:
            return
        stall_file = os.path.join(args["signal_dir"], STALL_FILE)
        now = time.time()
        # Progress is a step, an evaluation or a (re)start: a failing rank's last records (its failed result) are not.
        progress = metrics if (metrics or {}).get("kind") in PROGRESS_KINDS else None
        if boolean(args.get("progress", False), strict=False) and job["state"] == "running" and progress:
            key = progress.get("time"), progress.get("step"), progress.get("kind")
            if key != state.get("key"):
                state.update(key=key, since=now)
                if os.path.exists(stall_file):
                    os.remove(stall_file)
            elif now - state["since"] > hang_after and not os.path.exists(stall_file):
                stalled = {"at": now, "step": progress.get("step"), "stalled_s": round(now - state["since"], 1)}
                self._write(stall_file, stalled)
        stall = self._read(stall_file)
        if stall is None:
            job.pop("hang", None)  # progress again: a pause, not a hang
            return
        if job["state"] != "running" or state.get("dumped") == stall.get("at"):
            return
        state["dumped"] = stall.get("at")
        dump = self._execute_module(
            module_name="rdma_llm.cluster.train_hang_dump",
            module_args={"run_dir": args["run_dir"], "launch_id": args["launch_id"], "spy": args["spy"]},
            task_vars=task_vars,
        )
        # Each rank's main thread only: what the attribution reads (the whole dump stays in the host's logs).
        records = [{**r, "threads": [t for t in [hang.main_thread(r)] if t]} for r in dump.get("records") or []]
        job["hang"] = {"at": stall.get("at"), "step": stall.get("step"), "records": records,
                       "error": dump.get("msg") if dump.get("failed") else None}  # fmt: skip
        display.display(
            f"{task_vars['inventory_hostname']}: no step for {stall.get('stalled_s', hang_after)} s after step "
            f"{stall.get('step')}: "
            + (f"stacks of {len(records)} rank(s) kept (logs/hang-{args['launch_id']}.json)" if records
               else f"no stacks ({dump.get('msg') or 'no rank found'})")
        )  # fmt: skip

    @staticmethod
    def _rejoin(job: dict, seen: dict, lost_after: float, args: dict) -> None:
        """A restarted host: while its share is not back (`rejoining`: its rejoin unit has not run in this boot) it
        is waited for up to lost_after, then it is `missing`; once back (the transient unit started again: only a
        rejoin unit starts it twice in one launch) it is said, and listed in the job's `rejoined`. `seen` carries
        the unit's last start and when the host was first found rejoining from poll to poll."""
        host, unit = job["host"], job["unit"]
        if job["state"] == "rejoining" and host in (args.get("lost") or []):
            # The launch counted it lost (its manifest): a later look does too, whatever its rejoin unit does now.
            job.update(state="missing", why="lost during the launch (its manifest's lost_nodes); restarted since")
            return
        if job["state"] == "rejoining":
            if "since" not in seen:
                seen["since"] = time.time()
                display.display(f"{host}: restarted; waiting for its share of the run to rejoin ({args['unit']})")
            elif time.time() - seen["since"] > lost_after:
                job.update(
                    state="missing",
                    why=f"restarted, and its share did not come back within {lost_after:.0f} s (the rejoin unit "
                    f"{rejoin.rejoin_unit_name(args['unit'])}: {unit.get('RejoinActiveState', '?')})",
                )
            return
        seen.pop("since", None)
        started = unit.get("ExecMainStartTimestamp") or ""
        if args.get("engine", "systemd") != "systemd" or job["state"] != "running" or started in ("", "n/a"):
            return
        if seen.get("started") and started != seen["started"]:
            job.setdefault("rejoined", []).append(outcome.systemd_time(started))
            display.display(f"{host}: restarted, and its share of the run rejoined (started again {started})")
        seen["started"] = started

    @staticmethod
    def _read(path: str) -> dict | None:
        try:
            with open(path, encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    @staticmethod
    def _peer_records(signal_dir: str) -> dict[str, dict]:
        """host -> record of every host whose unit has ended (or that was lost)."""
        out = {}
        try:
            names = sorted(os.listdir(signal_dir))
        except OSError:
            return out
        for name in names:
            if not name.endswith(".json") or name.startswith("@"):
                continue
            record = ActionModule._read(os.path.join(signal_dir, name))
            if record is not None:
                out[name[: -len(".json")]] = record
        return out

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args
        host = task_vars["inventory_hostname"]
        self._samples: list = []
        deadline, interval = float(args["deadline"]), float(args.get("poll_interval", 10))
        lost_after, launched = float(args.get("lost_after", 30)), float(args["launched"])
        signal_dir, progress = args["signal_dir"], boolean(args.get("progress", False), strict=False)
        queue_timeout = float(args.get("queue_timeout") or 0)
        job = {"host": host, "state": "running", "unit": {}, "ended": None, "why": "", "link_down_at": None}
        last_contact, polls, timed_out, peer = time.time(), 0, False, None
        link_grace = float(args.get("link_grace", 45))
        nodes, min_nodes = list(args.get("nodes") or []), int(args.get("min_nodes") or 0)
        # Seconds the Slurm job waited in the queue: they do not count against the deadline.
        pending_s, pending_since = 0.0, None
        hang_state: dict = {}
        rejoin: dict = {}  # the unit's last start; when this host was first seen restarted (_rejoin)
        while True:
            polls += 1
            lost = ""
            try:
                props, link, metrics, workers = self._poll(args, task_vars)
                job["workers"] = workers
                last_contact = time.time()
                job["unit"] = props
                job["state"] = poll.unit_state(props)
                self._rejoin(job, rejoin, lost_after, args)
                if link and link not in ("up", "unknown"):
                    if job["link_down_at"] is None:
                        job["link_down_at"] = time.time()
                    job["why"] = (
                        f"fabric link {args['fabric_if']} {link} since {time.time() - job['link_down_at']:.0f} s"
                    )
                else:
                    job["link_down_at"] = None
                    # The Slurm engine: the cause Slurm gives (a time limit, a failed node, a held job).
                    job["why"] = props.get("Why", "")
                if job["state"] == "pending":
                    pending_since = pending_since or time.time()
                    waited = pending_s + time.time() - pending_since
                    if queue_timeout and waited > queue_timeout:
                        job["state"] = "failed"
                        job["why"] = (
                            f"Slurm job {props.get('JobId', '?')} still {props.get('JobState', 'PENDING')} "
                            f"({props.get('Reason') or 'no reason given'}) after {waited:.0f} s in the queue "
                            "(train_launch_slurm_queue_timeout)"
                        )
                elif pending_since is not None:
                    pending_s += time.time() - pending_since
                    pending_since = None
                if progress:
                    job["metrics"] = metrics
                    ended = len(self._peer_records(signal_dir)) + int(job["state"] not in outcome.ACTIVE)
                    hosts = int(args.get("hosts", 1))
                    # launched <= 0 (a status look at a detached run): count from the unit's start.
                    started = outcome.systemd_time(props.get("ExecMainStartTimestamp", ""))
                    since = launched if launched > 0 else started or time.time()
                    elapsed = time.time() - since
                    if job["state"] == "pending":
                        display.display(slurm_state.queued_line(elapsed, props))
                    else:
                        display.display(
                            outcome.progress_line(elapsed - pending_s, hosts - ended, hosts, metrics, args["max_steps"])
                        )
                self._watch_hang(args, task_vars, job, hang_state, metrics)
            except (AnsibleConnectionFailure, AnsibleError) as e:
                lost = str(e)[:200]
                if time.time() - last_contact > lost_after:
                    job.update(state="unreachable", why=f"unreachable for {lost_after:.0f} s ({lost})")
            if job["state"] == "running" and job["link_down_at"] and time.time() - job["link_down_at"] > link_grace:
                # The collective would hang until its timeout: end the watch now, the role stops the job.
                job["state"] = "failed"
            if job["state"] == "unreachable":
                job["ended"] = last_contact
                self._signal(signal_dir, host, job)
                break
            if job["state"] not in outcome.ACTIVE:
                job["ended"] = outcome.systemd_time(job["unit"].get("ExecMainExitTimestamp", "")) or time.time()
                if job["link_down_at"] is not None:
                    job["ended"] = min(job["ended"], job["link_down_at"])
                self._signal(signal_dir, host, job)
                break
            records = self._peer_records(signal_dir)
            # Hosts lost for good that the job goes on without (min_nodes) do not end this watch.
            if outcome.peers_end_watch(records, host, nodes, min_nodes, str(args.get("rdzv_host") or "")):
                peer = next(h for h, r in records.items() if h != host and r.get("state") != "completed")
                if not lost:
                    break
                # Out of touch while a peer's job ended: the peer may have failed because this host went away
                # (a host that shuts down ends its torchrun, which ends the others'). Keep polling until the
                # host answers again or stays silent for lost_after (then it is the one to name).
            waiting = pending_s + (time.time() - pending_since if pending_since is not None else 0.0)
            if time.time() > deadline + waiting:
                timed_out = True
                break
            time.sleep(interval)
        result.update(
            job=job, polls=polls, timed_out=timed_out, peer_failed=peer, queued_s=round(pending_s, 1), changed=False,
            counter_samples=self._samples,
        )  # fmt: skip
        return result
