"""runner: declarative, YAML-driven batch payouts and remittances, exactly once.

The package splits by responsibility: ``cli`` (the command line, thin), ``money`` (decimal
rules shared by validation and the sandbox), ``provider`` (HTTP clients, auth, errors),
``sandbox`` (a faithful emulator of the provider's APIs, the default target).
"""

__version__ = "0.1.0"
