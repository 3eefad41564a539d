"""The money transfer service (document 2, ``/v1/money-transfer/``): ``catalogue`` (payers,
rates, divisions, entities), ``models`` (pricing, balances), ``schemas``,
``responses`` (the routes)."""
