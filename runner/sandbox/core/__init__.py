"""What every service of the sandbox shares, as moto/core is to moto's services: settings
(``knobs``, ``config``, ``faults``), time (``clock``, ``lifecycle``, ``statuses``), state
(``store``), the provider's conventions (``auth``, ``errors``, ``paths``, ``pagination``,
``routing``, ``parties``, ``schemas``, ``catalogue``), the quote-create-confirm pattern of
two services (``quotes``), ``callbacks``, the limits of a request (``bounds``), the ``guard``
every request meets first, the fault ``middleware`` and the ``admin`` API.
Nothing here imports a service package.
"""
