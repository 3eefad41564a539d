"""The collection service's payments (document 1, ``/v1/payment/``): ``catalogue`` (payment
pages, rates, test cards, demo orders), ``checks`` (what a request must carry), ``models``
(payment orders, their statuses and operations), ``schemas``, ``responses`` (the routes)."""
