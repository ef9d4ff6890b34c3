"""The repository is the collection rdma_llm.cluster: it builds, installs offline into a fresh directory and runs
a playbook by FQCN from outside the checkout; inside, roles and plugins reach each other by name only."""

from __future__ import annotations

import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from tests.conftest import ROOT, run, tail, tool_env

pytestmark = pytest.mark.lint

EXAMPLE_VAULT_PASSWORD = "rdma-llm-example"  # documented in inventory/example/group_vars/switches/main.yml


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("build")
    proc = run(["ansible-galaxy", "collection", "build", "--output-path", str(out)], timeout=300)
    assert proc.returncode == 0, tail(proc)
    (tarball,) = out.glob("rdma_llm-cluster-*.tar.gz")
    return tarball


def test_the_artifact_holds_the_collection_and_not_the_development_tree(built: Path) -> None:
    with tarfile.open(built) as tar:
        names = tar.getnames()
        links = [m.name for m in tar.getmembers() if m.issym() or m.islnk()]
    top = {n.split("/", 1)[0] for n in names}
    assert {"roles", "playbooks", "plugins", "payload", "meta", "README.md", "MANIFEST.json"} <= top, sorted(top)
    assert not top & {"tests", "lab", "bench", "molecule", ".venv", ".ansible", ".git", "artifacts"}, sorted(top)
    assert "plugins/module_utils/contract/check.py" in names and "inventory/example/hosts.yml" in names
    assert not [n for n in names if n.startswith("inventory/lab")], "the lab inventory is the checkout's"
    assert links == [], links


def test_installed_collection_runs_a_playbook_by_fqcn_outside_the_checkout(built: Path, tmp_path: Path) -> None:
    """Installed offline (its dependencies are the ansible bundle's), then `rdma_llm.cluster.preflight` runs from
    a directory with no ansible.cfg and no link to this checkout: a good inventory passes, a bad one is refused by
    the contract with its exact message."""
    dest = tmp_path / "collections"
    # Only the fresh directory on the collections path: the checkout's link would make the install a no-op.
    env = tool_env(ANSIBLE_COLLECTIONS_PATH=str(dest))
    install = ["ansible-galaxy", "collection", "install", "--offline", "--no-deps", "-p", str(dest), str(built)]
    proc = run(install, timeout=300, env=env)
    assert proc.returncode == 0, tail(proc)
    installed = dest / "ansible_collections" / "rdma_llm" / "cluster"
    assert (installed / "MANIFEST.json").is_file() and not installed.is_symlink()
    env.pop("ANSIBLE_CONFIG", None)
    work = tmp_path / "elsewhere"
    work.mkdir()
    secret = tmp_path / "vault-pass"
    secret.write_text(EXAMPLE_VAULT_PASSWORD + "\n")

    def preflight(inventory: Path, *extra: str) -> subprocess.CompletedProcess:
        cmd = [
            "ansible-playbook",
            "-i",
            str(inventory),
            "rdma_llm.cluster.preflight",
            "-e",
            "preflight_check_facts=false",
            "-e",
            "preflight_check_switches=false",
        ]
        return subprocess.run(
            [*cmd, *extra], cwd=work, env=env, text=True, capture_output=True, timeout=300, check=False
        )

    good = preflight(installed / "inventory" / "example", "--vault-id", f"example@{secret}")
    assert good.returncode == 0, tail(good)
    assert re.search(r"Check the inventory contract \(every node, every switch\)\] \*+\nok: ", good.stdout), tail(good)
    assert str(ROOT) not in good.stdout + good.stderr, "the installed collection reached into the checkout"

    inv = tmp_path / "bad"
    shutil.copytree(installed / "inventory" / "example", inv)
    (inv / "group_vars" / "all" / "zz-bad.yml").write_text("cluster_roce_dscp: 64\n")
    refused = preflight(inv, "--vault-id", f"example@{secret}")
    out = " ".join((refused.stdout + refused.stderr).split())
    assert refused.returncode != 0 and "all: cluster_roce_dscp must be an integer 0-63 (got 64)" in out, out[-3000:]


LOADER = re.compile(r"spec_from_file_location|SourceFileLoader|sys\.path\.(insert|append)")
# A task file or template taken from another role's folder (the collection's payload/ is not a role).
RELATIVE = re.compile(r"(import_tasks|include_tasks|src):\s*\S*\.\./\.\./(?!payload)")


def test_roles_and_plugins_reach_each_other_by_name_only() -> None:
    """No path loaders, symlinks or `../../` task imports between roles and plugins (they import by FQCN)."""
    tracked = subprocess.run(
        ["git", "ls-files", "-s", "roles", "plugins", "playbooks"], cwd=ROOT, text=True, capture_output=True
    ).stdout.splitlines()
    assert [line for line in tracked if line.startswith("120000")] == [], "symlinks"
    loaders, relative = [], []
    for line in tracked:
        path = ROOT / line.split("\t", 1)[1]
        text = path.read_text(errors="replace")
        if path.suffix == ".py" and LOADER.search(text):
            loaders.append(path.relative_to(ROOT))
        if path.suffix in (".yml", ".j2") and RELATIVE.search(text):
            relative.append(path.relative_to(ROOT))
    assert loaders == [] and relative == [], (loaders, relative)
