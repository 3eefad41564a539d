"""The merchant payment service (document 3, part A, ``/v1/merchant-payment/``):
``catalogue`` (payment methods), ``models`` (pricing, payment details, merchant
balances), ``schemas``, ``responses`` (the routes)."""
