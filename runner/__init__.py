"""runner: declarative, YAML-driven batch payouts and remittances, exactly once.

The package splits by responsibility, each layer using only those below it:

- ``cli``: the command line, thin (the only place that imports click or exits);
- ``connect``: the composition root, from a job to its provider clients (starting the
  embedded sandbox for ``base_url: sandbox``);
- ``kinds``: the table of job kinds, each kind's parts declared once;
- ``engine``: the run of a job (``batch``) and each kind's exactly-once flow;
- ``validation``: every item checked against the provider's data before anything is sent;
- ``summary``: the batch's one read model (``Summary``) and its views: terminal lines,
  text, HTML, JSON, CSV, email;
- ``state``: runner's own state behind one interface (SQLite by default);
- ``job``: the job file, its rows and templates, as typed items;
- ``provider``: HTTP clients per service, auth, the answer-to-error mapping, retries;
- ``errors``: the one exception tree; ``money``, ``rules``, ``cards``: the provider's rules
  for amounts, fields and card numbers, shared with the sandbox;
- ``sandbox``: a faithful emulator of the provider's APIs, laid out by service.
"""

__version__ = "0.1.0"
