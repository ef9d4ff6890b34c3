"""The lookups that build one of the collection's commands as a zipapp on the controller (node_check_zipapp,
metrics_zipapp): one run(), each lookup naming its command's entry module and name (module_utils/node/build.py)."""

from __future__ import annotations

from ansible import constants as C
from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.build import BuildError, build


class ZipappLookup(LookupBase):
    """A lookup of no terms and one option, `dir`; returns [the built command's path]."""

    lookup: str = ""  # the lookup's own name, for its errors
    entry: str = ""  # the command's entry module (its main())
    command: str = ""  # the command's name

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        if terms:
            raise AnsibleLookupError(f"{self.lookup} takes no terms (got {terms!r})")
        where = self.get_option("dir") or C.DEFAULT_LOCAL_TMP
        try:
            return [str(build(where, entry=self.entry, name=self.command))]
        except (BuildError, OSError) as exc:
            raise AnsibleLookupError(f"{self.lookup}: cannot build {self.command} in {where}: {exc}") from exc
