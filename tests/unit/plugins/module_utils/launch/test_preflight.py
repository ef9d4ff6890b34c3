"""The checks before a launch (plugins/module_utils/launch/preflight.py): free space, the rendezvous port, the
fabric between the peers, the pre-flight all-reduce's results and the rendezvous host asked for."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import preflight as C

from tests.conftest import ROOT

ALLREDUCE_CHECK = ROOT / "roles" / "train_launch" / "files" / "allreduce_check.py"

ALLREDUCE_OK = {"rc": 0, "stdout_lines": ['{"ok": true, "host": "a", "world_size": 2, "seconds": 0.4, "error": null}']}


@pytest.mark.parametrize(
    ("registered", "expected"),
    [
        ({"a": ALLREDUCE_OK, "b": ALLREDUCE_OK}, [("a", True, None), ("b", True, None)]),
        # the check's own error line wins over anything else it printed
        (
            {
                "a": ALLREDUCE_OK,
                "b": {
                    "rc": 2,
                    "stdout_lines": ["warming up", '{"ok": false, "error": "b could not reach node 0 (a)"}'],
                    "stderr": "Traceback ...",
                },
            },
            [("a", True, None), ("b", False, "b could not reach node 0 (a)")],
        ),
        # no JSON line: the module's message, then stderr, then "no output"
        ({"a": {"rc": 1, "msg": "non-zero return code", "stdout_lines": []}}, [("a", False, "non-zero return code")]),
        ({"a": {"rc": 137, "stdout_lines": ["{broken"], "stderr": "Killed"}}, [("a", False, "Killed")]),
        ({"a": {}}, [("a", False, "no output")]),
        ({"a": {"rc": 1, "stderr": "x" * 500}}, [("a", False, "x" * 300)]),
    ],
)
def test_allreduce_results(registered, expected) -> None:
    hostvars = {h: {"__train_launch_reg_allreduce": r} for h, r in registered.items()}
    got = C.allreduce_results(list(registered), hostvars)
    assert [(r["host"], r["ok"], r["detail"]) for r in got] == expected
    assert [r["text"] for r in got if not r["ok"]] == [f"{h}: {d}" for h, ok, d in expected if not ok]


# One rank of roles/train_launch/files/allreduce_check.py, run as the launch runs it (its own __main__), with a
# stand-in all-reduce in mode `contribute` (the rank adds 1 to what it sends: a wrong value in the sum) or `corrupt`
# (the reduction ran, then the last element of what this rank got is off by one); `-` runs it untouched.
WRONG_RANK = """
import runpy, sys
import torch.distributed as dist
mode, script = sys.argv[1], sys.argv[2]
real = dist.all_reduce
def all_reduce(tensor, *args, **kwargs):
    if mode == "contribute":
        tensor += 1.0
    work = real(tensor, *args, **kwargs)
    if mode == "corrupt":
        tensor[-1] += 1.0
    return work
dist.all_reduce = all_reduce
sys.argv = [script, *sys.argv[3:]]
runpy.run_path(script, run_name="__main__")
"""


def _allreduce_check(modes: list[str]) -> dict:
    """allreduce_check.py on len(modes) gloo ranks on loopback (hosts h0, h1, ...), rank r in mode modes[r]; what
    the launch registers on each host: {host: {rc, stdout_lines, stderr}}."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    hosts = [f"h{r}" for r in range(len(modes))]
    argv = ["--hosts", ",".join(hosts), "--master", "127.0.0.1", "--port", str(port), "--ifname", "lo",
            "--timeout", "60"]  # fmt: skip
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRONG_RANK, mode, str(ALLREDUCE_CHECK), *argv, "--rank", str(rank)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank, mode in enumerate(modes)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    return {
        h: {"rc": p.returncode, "stdout_lines": out.splitlines(), "stderr": err}
        for h, p, (out, err) in zip(hosts, procs, outs, strict=True)
    }


def test_allreduce_check_fails_on_a_wrong_sum_and_names_the_host() -> None:
    pytest.importorskip("torch")
    # Rank 1 sends 3 where it should send 2: every rank gets 4 instead of 1 + 2 = 3, and each fails naming itself
    # (a sum cannot tell who sent the wrong part).
    got = _allreduce_check(["-", "contribute"])
    assert {h: r["rc"] for h, r in got.items()} == {"h0": 5, "h1": 5}, got
    for host, reg in got.items():
        line = json.loads(reg["stdout_lines"][-1])
        assert not line["ok"] and line["host"] == host, line
        assert line["error"] == f"all-reduce on {host} gave 4.0 at element 0 (1024 of 1024 wrong), expected 3.0"
    results = C.allreduce_results(list(got), {h: {"__train_launch_reg_allreduce": r} for h, r in got.items()})
    assert [(r["host"], r["ok"]) for r in results] == [("h0", False), ("h1", False)], results
    assert results[1]["text"] == "h1: all-reduce on h1 gave 4.0 at element 0 (1024 of 1024 wrong), expected 3.0"
    # Rank 0's sum is corrupted after the reduction, in one element of 1024: rank 0 alone fails, and says where.
    got = _allreduce_check(["corrupt", "-"])
    assert {h: r["rc"] for h, r in got.items()} == {"h0": 5, "h1": 0}, got
    results = C.allreduce_results(list(got), {h: {"__train_launch_reg_allreduce": r} for h, r in got.items()})
    assert [(r["host"], r["ok"], r["detail"]) for r in results] == [
        ("h0", False, "all-reduce on h0 gave 4.0 at element 1023 (1 of 1024 wrong), expected 3.0"),
        ("h1", True, None),
    ], got


def _node(host="n1", rank=0, df="Avail\n 5000\n", listeners="", peers="n2 10.0.0.2 ok\n"):
    return {
        "host": host,
        "rank": rank,
        "ckpt_dir": "/r/out/checkpoints",
        "df": df,
        "listeners": listeners,
        "fabric_if": "rdma0",
        "mtu": 9000,
        "peers": peers,
    }


@pytest.mark.parametrize(
    ("nodes", "problems"),
    [
        ([_node(), _node("n2", 1, peers="n1 10.0.0.1 ok\n")], []),
        (
            [_node(df="Avail\n  63\n")],
            ["n1: 63 MiB free in /r/out/checkpoints (need train_launch_min_free_mb=64 for checkpoints)"],
        ),
        (
            [_node(df="df: /r/out/checkpoints: No such file or directory")],
            ["n1: free space in /r/out/checkpoints unknown"],
        ),
        (
            # ss -Htln 'sport = :29500' on node 0 (iproute2 6.1), a leftover torchrun holding the port
            [_node(listeners="LISTEN 0      1024         0.0.0.0:29500      0.0.0.0:*   \n")],
            ["n1: rendezvous port 29500 is in use (LISTEN 0 1024 0.0.0.0:29500 0.0.0.0:*)"],
        ),
        ([_node("n2", 1, listeners="LISTEN 0 1024 0.0.0.0:29500 0.0.0.0:*")], []),  # only node 0 hosts it
        (
            [_node(peers="n2 10.0.0.2 none\nn3 10.0.0.3 small\n")],
            [
                "n1: n2 (10.0.0.2) does not answer on rdma0",
                "n1: n3 (10.0.0.3) answers on rdma0 only below its MTU 9000",
            ],
        ),
        ([_node(peers="- - noping\n")], ["n1: ping is not installed"]),
    ],
)
def test_preflight_problems(nodes, problems) -> None:
    got = C.preflight_problems(nodes, 64, 29500)
    assert len(got) == len(problems), got
    for g, want in zip(got, problems, strict=True):
        assert g.startswith(want), got


PREFLIGHT_HOSTVARS = {
    "n1": {
        "__train_launch_node_rank": "0",
        "__train_launch_run_dir": "/var/lib/train/r1",
        "__train_launch_fabric_if": "rdma-0",
        "__train_launch_fabric_ip": "10.0.0.1",
        "ansible_facts": {"rdma_0": {"mtu": 9000}},
        "__train_launch_reg_df": {"stdout": " Avail\n 5000"},
        "__train_launch_reg_rdzv_port": {"stdout": ""},
        "__train_launch_reg_peers": {"stdout": "n2 10.0.0.2 ok"},
    },
    # a host whose checks were skipped (no df, not node 0) and whose NIC has no facts
    "n2": {
        "__train_launch_node_rank": 1,
        "__train_launch_run_dir": "/var/lib/train/r1",
        "__train_launch_fabric_if": "ib0",
        "__train_launch_fabric_ip": "10.0.0.2",
        "ansible_facts": {},
        "__train_launch_reg_rdzv_port": {"skipped": True},
    },
    "n3": {"__train_launch_fabric_ip": "10.0.0.3"},
}


@pytest.mark.parametrize(
    ("nodes", "me", "expected"),
    [
        (["n1", "n2", "n3"], "n2", ["n1", "10.0.0.1", "n3", "10.0.0.3"]),
        (["n1", "n2"], "n1", ["n2", "10.0.0.2"]),
        (["n1"], "n1", []),
        (["n1", "gone"], "n1", ["gone", ""]),
    ],
)
def test_peer_args(nodes, me, expected) -> None:
    assert C.peer_args(nodes, me, PREFLIGHT_HOSTVARS) == expected


def test_preflight_nodes_feed_preflight_problems() -> None:
    nodes = C.preflight_nodes(["n1", "n2"], PREFLIGHT_HOSTVARS)
    assert nodes == [
        {
            "host": "n1",
            "rank": 0,
            "ckpt_dir": "/var/lib/train/r1/out/checkpoints",
            "df": " Avail\n 5000",
            "listeners": "",
            "fabric_if": "rdma-0",
            "mtu": 9000,
            "peers": "n2 10.0.0.2 ok",
        },
        {
            "host": "n2",
            "rank": 1,
            "ckpt_dir": "/var/lib/train/r1/out/checkpoints",
            "df": "",
            "listeners": "",
            "fabric_if": "ib0",
            "mtu": None,
            "peers": "",
        },
    ]
    assert C.preflight_problems(nodes, 1000, 29500) == [
        "n2: free space in /var/lib/train/r1/out/checkpoints unknown (df said '')"
    ]


@pytest.mark.parametrize(
    ("rdzv_host", "scheduler", "problems"),
    [
        ("", "systemd", []),
        ("", "slurm", []),
        ("head", "systemd", []),
        ("nosuch", "systemd", ["train_launch_rdzv_host=nosuch is not a host of the inventory"]),
        (
            "head",
            "slurm",
            ["train_launch_rdzv_host (a rendezvous that outlives any node) is not offered through Slurm"],
        ),
    ],
)
def test_rdzv_host_problems(rdzv_host, scheduler, problems) -> None:
    got = C.rdzv_host_problems(rdzv_host, ["n1", "n2", "head"], scheduler)
    assert len(got) == len(problems) and all(g.startswith(p) for g, p in zip(got, problems, strict=True)), got


def resolve(stdin: str, *argv: str) -> dict:
    """payload/config.py resolve as the role's assert runs it, its result as the command module registers it."""
    cmd = [sys.executable, str(ROOT / "payload" / "config.py"), *(argv or ("resolve", "--source=train_launch_payload"))]
    proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=60, check=False)
    return {"rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr, "msg": "non-zero return code"}


@pytest.mark.parametrize(
    ("stdin", "argv", "said"),
    [
        ('{"lr": "x"}', (), "train_launch_payload: lr='x': expected a number"),
        ("not json", (), "train_launch_payload: stdin is not valid JSON: "),
        # Its usage follows the error line: the error line leads all the same.
        ("{}", ("nosuch",), "expected the command resolve"),
    ],
)
def test_a_payload_config_refusal_leads_with_the_payloads_own_words(stdin, argv, said) -> None:
    got = C.payload_refusal(resolve(stdin, *argv))
    assert got.startswith(said) and got.endswith("(payload/config.py refused the payload config, exit code 2)"), got
    assert "non-zero return code" not in got and "usage:" not in got


def test_a_payload_check_that_crashed_gives_its_last_words_and_one_that_passed_none() -> None:
    crashed = {
        "rc": 1,
        "stdout": '{"partial": \n',
        "stderr": "Traceback (most recent call last):\n  ...\nKeyError: 'engine'\n",
    }
    assert (
        C.payload_refusal(crashed) == "KeyError: 'engine' (payload/config.py refused the payload config, exit code 1)"
    )
    assert C.payload_refusal(resolve('{"data": "/srv/corpus"}')) == ""
