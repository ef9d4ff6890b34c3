"""The one error type of the project's rules: a value they refuse, with a message for whoever set it.

The rules are plain Python (no Ansible), so pytest imports them without Ansible; the filter adapters
(plugins/plugin_utils/filters.py) hand this error to Ansible as its own filter error, message unchanged.
"""

from __future__ import annotations


class RuleError(ValueError):
    """A value a rule refuses; the message names the variable or host and says what is wrong."""
