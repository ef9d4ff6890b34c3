"""`train.py eval`: a run's checkpoints and exports judged the same way each time, on one process, no process group.

For each model: the perplexity of the run's own held-out blocks (the very micro-batches the trainer validated on,
so it is exp of the trainer's validation loss at that step) and of named corpora, and a prompt suite's score. One
JSON per model in <out_dir>/eval, the table of every model evaluated there (table.md, summary.json; the
controller plots the trend from summary.json), and the gate on the newest model: the run's own gate settings on
its validation loss plus --min_suite_score.

A suite is JSON lines, one item each: {"id", "prompt", then one rule}
  expected + distractors: passes when the expected continuation is more likely (mean log-probability per token)
                          than every distractor (the multiple-choice scoring of EleutherAI's lm-evaluation-harness)
  expected alone:         passes when greedy decoding reproduces it exactly (LAMBADA's rule)
  keywords:               passes when greedy decoding of max_new_tokens (the item's or --max_new_tokens) contains
                          every keyword, case-insensitive
The score is the fraction of items passed; `mean_logprob`, the expected continuations' mean log-probability, moves
smoothly even while a small model passes nothing.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from payload import ckpt_verify as V
from payload import data as D
from payload import gate as G
from payload.config import EXPORTS, EvalConfig, TrainConfig, from_dict

DEFAULT_SUITE = Path(__file__).resolve().parent / "evals" / "suite.jsonl"
RULES = ("choice", "exact", "keywords")


class EvalError(ValueError):
    """Input eval cannot take (a missing model, a bad suite line); the message names it."""


@dataclass
class Target:
    name: str  # the result's file name: step_0000016, hf_model_ema, or a directory's name
    kind: str  # checkpoint | export | model
    path: Path
    step: int | None = None


def targets(cfg: EvalConfig) -> list[Target]:
    """The checkpoints `steps` names (by step, oldest first), then each of `models` in the order given."""
    out = Path(cfg.out_dir)
    root = out / "checkpoints"
    found: list[Target] = []
    if cfg.steps:
        done = V.finished(root)
        by_step = {V.step_of(p.name): p for p in done}
        if cfg.steps == "latest":
            latest = root / "latest"
            if not latest.exists():
                raise EvalError(f"{root}: no checkpoints/latest")
            chosen = [root / latest.read_text().strip()]
        elif cfg.steps == "all":
            chosen = done
        else:
            wanted = [int(s) for s in cfg.steps.split(",")]
            missing = [s for s in wanted if s not in by_step]
            if missing:
                raise EvalError(f"{root}: no checkpoint of step(s) {', '.join(map(str, missing))}")
            chosen = sorted({by_step[s] for s in wanted}, key=lambda p: V.step_of(p.name))
        if not chosen:
            raise EvalError(f"{root}: no checkpoints")
        found += [Target(p.name, "checkpoint", p, V.step_of(p.name)) for p in chosen]
    for model in filter(None, (m.strip() for m in cfg.models.split(","))):
        path = out / model if model in EXPORTS else Path(model)
        if not (path / "config.json").is_file():
            raise EvalError(f"--models: {path} is not a Hugging Face model directory (no config.json)")
        found.append(Target(model if model in EXPORTS else path.name, "export" if model in EXPORTS else "model", path))
    return found


def run_config(out: Path) -> TrainConfig:
    path = out / "config.json"
    try:
        return from_dict(TrainConfig, json.loads(path.read_text()))
    except (OSError, ValueError) as e:
        raise EvalError(f"{path}: not a training run's config ({e})") from e


def load(target: Target):
    """(transformers causal LM in eval mode, tokenizer, trainer.json or None)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from payload.engines import checkpoint_state_dict
    from payload.model import as_hf, build_model, saved_architecture

    hf_logging.disable_progress_bar()  # one bar per model loaded is noise in a table of results
    if target.kind != "checkpoint":
        model = AutoModelForCausalLM.from_pretrained(str(target.path), local_files_only=True)
        return model.eval(), AutoTokenizer.from_pretrained(str(target.path), local_files_only=True), None
    bad = V.verify(target.path)
    if bad:
        raise EvalError(f"{target.path}: {bad}")
    meta = json.loads((target.path / "trainer.json").read_text())
    tcfg = saved_architecture(from_dict(TrainConfig, meta["config"]))
    tok = AutoTokenizer.from_pretrained(str(target.path / "tokenizer"), local_files_only=True)
    model = build_model(tcfg, len(tok), tok.convert_tokens_to_ids(D.EOS), log=lambda m: None)
    try:
        state = checkpoint_state_dict(target.path)
    except FileNotFoundError as e:  # node-local out_dirs: each node holds its own ranks' shards only
        raise EvalError(
            f"{target.path}: {Path(e.filename or '?').name} is not on this disk, so this sharded checkpoint is read "
            "where all its shards are; evaluate the run's export instead (--steps= --models=hf_model)"
        ) from e
    missing, unexpected = model.load_state_dict(state, strict=False)
    tied = getattr(getattr(model, "config", None), "tie_word_embeddings", True)
    if unexpected or [k for k in missing if not (tied and k.endswith("lm_head.weight"))]:
        raise EvalError(f"{target.path}: weights do not match the model (missing {missing}, unexpected {unexpected})")
    return as_hf(model).eval(), tok, meta


# ---------------------------------------------------------------------------------------------- perplexity


def validation_batches(cfg: TrainConfig, world: int, out: Path, tok) -> tuple[D.Blocks, list[np.ndarray]]:
    """The held-out micro-batches the trainer validated on with `world` ranks (every rank's, together)."""
    from payload import shards as S

    if cfg.stream or S.is_shard_dir(cfg.data):
        raise EvalError("validation: only a run on a text corpus or saved dataset is re-read here; name --corpora")
    cache = Path(cfg.cache_dir) if cfg.cache_dir else out / "cache"
    blocks = D.Blocks(D.load_tokens(D.tokenize_corpus(cfg.eval_data or cfg.data, cfg.text_column, tok, cache)),
                      cfg.block_size)  # fmt: skip
    val_ids = np.arange(blocks.n) if cfg.eval_data else D.split_blocks(blocks.n, cfg.val_fraction)[1]
    return blocks, [b for r in range(world) for b in D.val_batches(val_ids, cfg.batch_size, cfg.eval_batches, r, world)]


def corpus_batches(path: str, cfg: TrainConfig, n_batches: int, cache: Path, tok) -> tuple[D.Blocks, list]:
    """The first n_batches micro-batches of the run's shape from a named corpus, in this model's tokens."""
    blocks = D.Blocks(D.load_tokens(D.tokenize_corpus(path, cfg.text_column, tok, cache)), cfg.block_size)
    n = min(n_batches, blocks.n // cfg.batch_size)
    if n == 0:
        raise EvalError(f"{path}: {blocks.n} blocks of {cfg.block_size} tokens, fewer than one batch")
    ids = np.arange(n * cfg.batch_size)
    return blocks, [ids[i * cfg.batch_size : (i + 1) * cfg.batch_size] for i in range(n)]


@torch.no_grad()
def mean_loss(model, blocks: D.Blocks, batches: list) -> float:
    from payload.model import model_loss

    total = sum(model_loss(model, *map(torch.from_numpy, blocks.batch(ids)), fast=False).item() for ids in batches)
    return total / len(batches)


def perplexities(cfg: EvalConfig, run: TrainConfig, world: int, model, tok) -> dict:
    out = Path(cfg.out_dir)
    results = {}
    n_batches = cfg.eval_batches or run.eval_batches * world
    cache = Path(cfg.results_dir or out / "eval") / "cache"
    for part in filter(None, (p.strip() for p in cfg.corpora.split(","))):
        name, _, path = part.partition("=")
        try:
            if part == "validation":
                blocks, batches = validation_batches(run, world, out, tok)
            else:
                blocks, batches = corpus_batches(path, run, n_batches, cache, tok)
        except (OSError, ValueError) as e:  # EvalError too: the corpus, named
            raise EvalError(f"--corpora {name}: {e}") from e
        loss = mean_loss(model, blocks, batches)
        results[name] = {
            "path": path or (run.eval_data or run.data),
            "loss": round(loss, 6),
            "perplexity": round(math.exp(loss), 4),
            "blocks": sum(len(b) for b in batches),
        }
    return results


# ---------------------------------------------------------------------------------------------- the suite


def read_suite(path: Path) -> list[dict]:
    """The suite's items, each with its rule; EvalError names the file and line of a bad one."""
    items = []
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise EvalError(f"--suite: {e}") from e
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            item = json.loads(line)
        except ValueError as e:
            raise EvalError(f"{where}: not JSON ({e})") from e
        if not isinstance(item, dict) or not isinstance(item.get("prompt"), str):
            raise EvalError(f"{where}: an item is an object with a string 'prompt'")
        expected, distractors, keywords = item.get("expected"), item.get("distractors"), item.get("keywords")
        if (expected is None) == (keywords is None):
            raise EvalError(f"{where}: give 'expected' (with or without 'distractors') or 'keywords', one of them")
        if expected is not None and not (isinstance(expected, str) and expected):
            raise EvalError(f"{where}: 'expected' must be a non-empty string")
        if distractors is not None and not (
            expected is not None and isinstance(distractors, list) and distractors
            and all(isinstance(d, str) and d for d in distractors)
        ):  # fmt: skip
            raise EvalError(f"{where}: 'distractors' is a non-empty list of strings beside 'expected'")
        if keywords is not None and not (
            isinstance(keywords, list) and keywords and all(isinstance(k, str) and k for k in keywords)
        ):
            raise EvalError(f"{where}: 'keywords' is a non-empty list of strings")
        rule = "keywords" if keywords is not None else "choice" if distractors else "exact"
        items.append(dict(item, id=str(item.get("id", n)), rule=rule))
    if not items:
        raise EvalError(f"{path}: no items")
    return items


def _prompt_ids(tok, prompt: str) -> list[int]:
    return tok(prompt).input_ids or [tok.convert_tokens_to_ids(D.EOS)]


def _positions(model) -> int:
    config = model.config
    return getattr(config, "n_positions", None) or getattr(config, "max_position_embeddings", 1024)


@torch.no_grad()
def continuation_logprob(model, tok, prompt: str, continuation: str) -> float:
    """Mean log-probability per token of `continuation` after `prompt` (tokenized apart, as the harness does)."""
    context, cont = _prompt_ids(tok, prompt), tok(continuation).input_ids
    ids = (context + cont)[-(_positions(model) + 1) :]
    logits = model(input_ids=torch.tensor([ids[:-1]])).logits[0].float()
    logp = torch.log_softmax(logits[-len(cont) :], dim=-1)
    return logp.gather(1, torch.tensor(cont).unsqueeze(1)).mean().item()


@torch.no_grad()
def greedy(model, tok, prompt: str, n: int) -> list[int]:
    ids = torch.tensor([_prompt_ids(tok, prompt)[-(_positions(model) - n) :]])
    eos = tok.convert_tokens_to_ids(D.EOS)
    out = model.generate(ids, do_sample=False, max_new_tokens=n, pad_token_id=eos, eos_token_id=None)
    return out[0, ids.shape[1] :].tolist()


def score_item(model, tok, item: dict, max_new_tokens: int) -> dict:
    result = {"id": item["id"], "rule": item["rule"]}
    if item["rule"] == "keywords":
        text = tok.decode(greedy(model, tok, item["prompt"], int(item.get("max_new_tokens", max_new_tokens))))
        result |= {"output": text, "pass": all(k.lower() in text.lower() for k in item["keywords"])}
        return result
    lp = continuation_logprob(model, tok, item["prompt"], item["expected"])
    result["logprob"] = round(lp, 5)
    if item["rule"] == "choice":
        others = [continuation_logprob(model, tok, item["prompt"], d) for d in item["distractors"]]
        result |= {"distractor_logprobs": [round(x, 5) for x in others], "pass": lp > max(others)}
    else:
        want = tok(item["expected"]).input_ids
        got = greedy(model, tok, item["prompt"], len(want))
        result |= {"output": tok.decode(got), "pass": got == want}
    return result


def run_suite(items: list[dict], model, tok, max_new_tokens: int) -> tuple[dict, list[dict]]:
    scored = [score_item(model, tok, item, max_new_tokens) for item in items]
    lps = [r["logprob"] for r in scored if "logprob" in r]
    passed = sum(r["pass"] for r in scored)
    summary = {
        "items": len(scored),
        "passed": passed,
        "score": round(passed / len(scored), 4),
        "mean_logprob": round(sum(lps) / len(lps), 5) if lps else None,
    }
    return summary, scored


# ---------------------------------------------------------------------------------------------- results


def table(results: list[dict]) -> str:
    """Markdown: one row per model evaluated in the directory, its perplexities and its suite score."""
    corpora = sorted({c for r in results for c in r["corpora"]})
    head = ["model", "step", *(f"ppl {c}" for c in corpora), "suite", "mean logprob"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        suite = r.get("suite") or {}
        cells = [r["name"], "-" if r["step"] is None else str(r["step"])]
        cells += [f"{r['corpora'][c]['perplexity']:.2f}" if c in r["corpora"] else "-" for c in corpora]
        cells += [f"{suite['passed']}/{suite['items']}" if suite else "-"]
        cells += [f"{suite['mean_logprob']:.3f}" if suite.get("mean_logprob") is not None else "-"]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def collect(results_dir: Path) -> list[dict]:
    """Every model's result in the directory: checkpoints by step, then the exports and models by name."""
    results = []
    for path in sorted(results_dir.glob("*.json")):
        if path.name in ("summary.json", "gate.json"):
            continue
        results.append(json.loads(path.read_text()))
    return sorted(results, key=lambda r: (r["step"] is None, r["step"] or 0, r["name"]))


def judge(cfg: EvalConfig, run: TrainConfig, newest: dict) -> dict:
    """The run's gate (its own max_val_loss, baseline and regression) on the newest model, and the suite floor."""
    baseline = G.read_baseline(run.gate_baseline) if run.gate_baseline else None
    val = newest["corpora"].get("validation", {}).get("loss")
    suite = (newest.get("suite") or {}).get("score")
    gate = G.evaluate(val, run.gate_max_val_loss, baseline, run.gate_max_regression, suite, cfg.min_suite_score)
    return gate | {"model": newest["name"], "step": newest["step"], "message": G.describe(gate)}


def evaluate(cfg: EvalConfig) -> int:
    out = Path(cfg.out_dir)
    results_dir = Path(cfg.results_dir) if cfg.results_dir else out / "eval"
    try:
        run = run_config(out)
        chosen = targets(cfg)
        suite_path = DEFAULT_SUITE if cfg.suite == "default" else Path(cfg.suite) if cfg.suite else None
        items = read_suite(suite_path) if suite_path else []
        run_result = json.loads((out / "result.json").read_text()) if (out / "result.json").exists() else {}
        results_dir.mkdir(parents=True, exist_ok=True)
        newest = None
        for target in chosen:
            t0 = time.time()
            model, tok, meta = load(target)
            world = (meta or {}).get("world_size") or run_result.get("world_size") or 1
            record = {
                "name": target.name,
                "kind": target.kind,
                "path": str(target.path),
                "step": target.step if meta is None else meta["step"],
                "trainer_val_loss": (meta or {}).get("val_loss"),
                "corpora": perplexities(cfg, run, world, model, tok),
                "suite": None,
            }
            if items:
                summary, scored = run_suite(items, model, tok, cfg.max_new_tokens)
                digest = hashlib.sha256(suite_path.read_bytes()).hexdigest()
                record["suite"] = {"file": str(suite_path), "sha256": digest, **summary}
                record["items"] = scored
            record["seconds"] = round(time.time() - t0, 2)
            (results_dir / f"{target.name}.json").write_text(json.dumps(record, indent=1) + "\n")
            print(describe(record), flush=True)
            newest = record
    except (EvalError, OSError, ValueError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    everything = collect(results_dir)
    (results_dir / "summary.json").write_text(json.dumps(everything, indent=1) + "\n")
    (results_dir / "table.md").write_text(table(everything))
    print(table(everything), end="")
    gate = judge(cfg, run, newest)
    (results_dir / "gate.json").write_text(json.dumps(gate, indent=1) + "\n")
    print(G.describe(gate) + f" [{newest['name']}]")
    return 3 if gate["status"] == "fail" else 0


def describe(record: dict) -> str:
    parts = [f"{name} ppl {c['perplexity']:.2f}" for name, c in record["corpora"].items()]
    if record["suite"]:
        s = record["suite"]
        parts.append(f"suite {s['passed']}/{s['items']} (score {s['score']:.2f})")
    return f"eval {record['name']}: " + ", ".join(parts or ["nothing measured"]) + f" ({record['seconds']} s)"
