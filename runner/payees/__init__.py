"""Payee checks: before money moves, the account behind each item asked of the provider (its
status, and the name of who holds it) and that name compared with the row's (``names``)."""
