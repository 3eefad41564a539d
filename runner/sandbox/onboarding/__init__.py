"""The collection service's onboarding (document 1, ``/v1/onboarding/``): ``catalogue``
(templates, fees, seeded records), ``models`` (companies, merchants, accounts and how they
are named), ``schemas``, ``responses`` (the routes)."""
