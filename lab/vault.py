"""The lab's vault password: it protects the lab's own MUNGE key only (inventory/lab/group_vars/all/slurm.yml,
vault id `lab`), so it is written here in the open, as the example inventory's switch vault password is
documented in inventory/example/group_vars/switches/main.yml. Real clusters keep their own password out of the
repository (roles/slurm/README.md).

`lab up`, the lab CLI and the tests write it to .lab/vault-pass and hand Ansible `lab@<that file>` in
ANSIBLE_VAULT_IDENTITY_LIST, so no lab run prompts for it; by hand: `--vault-id lab@.lab/vault-pass`.
"""

from __future__ import annotations

import os

from lab import STATE_ROOT

VAULT_ID = "lab"
PASSWORD = "rdma-llm-lab"
PASSWORD_FILE = STATE_ROOT / "vault-pass"


def password_file():
    """Write .lab/vault-pass (mode 0600) unless it already holds the password; its path."""
    if not PASSWORD_FILE.exists() or PASSWORD_FILE.read_text().strip() != PASSWORD:
        PASSWORD_FILE.parent.mkdir(parents=True, exist_ok=True)
        PASSWORD_FILE.write_text(PASSWORD + "\n")
    os.chmod(PASSWORD_FILE, 0o600)
    return PASSWORD_FILE


def identity_list(current: str | None = None) -> str:
    """ANSIBLE_VAULT_IDENTITY_LIST with the lab's identity first (kept once), then whatever `current` holds."""
    mine = f"{VAULT_ID}@{password_file()}"
    others = [i for i in (current or "").split(",") if i.strip() and i.strip() != mine]
    return ",".join([mine, *others])
