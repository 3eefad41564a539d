"""The collection service's accounts (document 1, ``/v1/account/``): ``models`` (entries,
balances, validation of transfer and payout requests), ``schemas``, ``responses`` (the
routes)."""
