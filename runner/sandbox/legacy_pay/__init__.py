"""The legacy single-call Pay (document 3, part B, ``/Rest/V40/PaymentOrder/Pay``):
``schemas``, ``exceptions`` (ReturnCodes and the dialect of ``/Rest/``), ``models`` (the
payment order one Pay makes), ``responses`` (the route, JSON or XML)."""
