"""`runner console`: a web page over the state for the people who plan and approve.

The pages (``runner.console.app``) read the plans the state keeps and show what a controller
checks (``runner.console.views``, ``runner.engine.review``); approving, denying and
accepting a held payee are passkey assertions (``runner.console.signing``,
``runner.passkeys``) kept in the state beside the plan, which `runner apply` checks offline
as it checks SSH signatures; planners are told by mail (``runner.console.notify``). The
console never holds the provider's credentials.
"""
