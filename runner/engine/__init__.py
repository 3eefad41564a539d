"""The engine: per-kind pipelines (``remittance``, ``merchant_payment`` ... over the shared
``flow`` and ``quoted`` bases), the retry policy (``policy``) and the run of a whole job
(``batch.run_job``)."""
