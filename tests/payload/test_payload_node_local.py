"""Two "nodes" on this machine, each with its own out_dir (node-local disks, no shared file system): every
node keeps what its ranks need to resume, and a resumed run continues step for step as the straight one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from payload_helpers import base_args, free_port, read_jsonl

pytestmark = pytest.mark.payload

# keep_ckpts=3: steps 4, 8 and 12 stay for the fall-back below.
COMMON = dict(max_steps=12, log_interval=4, dropout=0.1, ckpt_interval=4, keep_ckpts=3)


def run_nodes(launch, out: Path, corpus, tokenizer_dir, cache: Path, **opts) -> list[str]:
    """Node 0 and node 1 (one rank each), each on its own out_dir and token cache; both must end with rc 0."""
    port = free_port()
    jobs = [
        launch(
            base_args(out / f"node{n}", corpus, tokenizer_dir, cache / f"node{n}", **COMMON, **opts),
            nproc=1,
            node=(n, 2, port),
        )
        for n in (0, 1)
    ]
    rcs = [job.wait(240) for job in jobs]
    outputs = [job.output() for job in jobs]
    assert rcs == [0, 0], "\n\n".join(o[-4000:] for o in outputs)
    return outputs


def losses(node_dir: Path) -> list[tuple[int, float]]:
    records = read_jsonl(node_dir / "metrics.jsonl")
    return [(r["step"], r["loss"]) for r in records if r["kind"] == "train" and r["rank"] == 0]


@pytest.mark.parametrize("engine", ["ddp", "fsdp"])
def test_node_local_out_dir_resumes_exactly(engine, launch, tmp_path, corpus, tokenizer_dir):
    straight, split, cache = tmp_path / "straight", tmp_path / "split", tmp_path / "cache"
    first = run_nodes(launch, straight, corpus, tokenizer_dir, cache, engine=engine)
    assert "out_dir per node" in first[0]

    run_nodes(launch, split, corpus, tokenizer_dir, cache, engine=engine, stop_after=8)
    for n in (0, 1):  # each node's disk alone holds a complete checkpoint for its ranks
        node = split / f"node{n}" / "checkpoints"
        assert (node / "latest").read_text().strip() == "step_0000008"
        ckpt = node / "step_0000008"
        assert (ckpt / "trainer.json").is_file() and (ckpt / f"rng_rank{n}.pt").is_file()
        if engine == "fsdp":  # the shard index on every node, and only this node's own shard
            files = sorted(p.name for p in (ckpt / "dcp").iterdir())
            assert files == [".metadata", f"__{n}_0.distcp"], files
    second = run_nodes(launch, split, corpus, tokenizer_dir, cache, engine=engine, export_hf="true")
    assert "at step 8" in second[0], second[0][-3000:]  # rank 0 speaks for the run
    # Each node exported the whole model to its own disk, the same weights on both.
    from transformers import AutoModelForCausalLM

    exported = [AutoModelForCausalLM.from_pretrained(str(split / f"node{n}" / "hf_model")).state_dict() for n in (0, 1)]
    assert exported[0].keys() == exported[1].keys()
    assert all((exported[0][k] == exported[1][k]).all() for k in exported[0])

    result = json.loads((split / "node0" / "result.json").read_text())
    assert result["status"] == "completed" and result["start_step"] == 8 and result["engine"] == engine
    assert [s for s, _ in losses(split / "node0")] == [s for s, _ in losses(straight / "node0")] == [4, 8, 12]
    assert [v for _, v in losses(split / "node0")] == pytest.approx(
        [v for _, v in losses(straight / "node0")], abs=2e-3
    )
    if engine != "ddp":
        return
    # Node 1's copy of step 12 and node 0's of step 8 go bad. The nodes resume from one step, the newest whole on
    # both: node 0 finds 12 good, node 1 goes back to 8; then node 0 checks 8, finds it bad and goes back to 4,
    # where node 1 joins it. Steps 12 and 8 are quarantined on both nodes, each with the node that failed it.
    for node, step in ((1, 12), (0, 8)):
        model = split / f"node{node}" / "checkpoints" / f"step_{step:07d}" / "model.pt"
        data = bytearray(model.read_bytes())
        data[len(data) // 2] ^= 0xFF
        model.write_bytes(bytes(data))
    third = run_nodes(launch, split, corpus, tokenizer_dir, cache, engine=engine)
    assert "resume: falling back to step_0000004: quarantined step_0000012 (" in third[0], third[0][-3000:]
    sha = "model.pt does not match its SHA-256 when saved"
    assert f"step_0000008 failed verification: {sha}" in third[0] and "step_0000012 failed" not in third[0]
    assert f"step_0000012 failed verification: {sha}" in third[1] and "step_0000008 failed" not in third[1]
    for n in (0, 1):
        node = split / f"node{n}"
        result = json.loads((node / "result.json").read_text())
        assert result["status"] == "completed" and result["start_step"] == 4, result
        assert [q["checkpoint"] for q in result["quarantined"]] == ["step_0000012", "step_0000008"], result
        assert all(q["why"].endswith(f": {sha}") and q["why"].count(": model.pt") == 1 for q in result["quarantined"])
        assert sorted(p.name[: len("quarantine-step_0000012")] for p in (node / "checkpoints").glob("quar*")) == [
            "quarantine-step_0000008", "quarantine-step_0000012"
        ]  # fmt: skip
        assert (node / "checkpoints" / "latest").read_text().strip() == "step_0000012"  # saved again
