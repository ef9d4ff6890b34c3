"""Fixtures of the reset record's tests: a temporary root with /etc/hosts and /etc/group, and the fake host's
commands on it (fake.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.plugins.module_utils.host.reset.fake import FakeSystem


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "hosts").write_text("127.0.0.1 localhost\n127.0.1.1 node1\n")
    (tmp_path / "etc" / "hosts").chmod(0o644)
    (tmp_path / "etc" / "group").write_text("root:x:0:\n")
    return tmp_path


@pytest.fixture
def system(root: Path) -> FakeSystem:
    return FakeSystem(root)
