"""``runner console``: the web page over the state where planners and approvers review plans
and approve them with passkeys (``runner.console``)."""

from __future__ import annotations

import socket
from decimal import Decimal
from pathlib import Path

import click

from runner.cli.options import location_of, reports_errors, state_dir_of, state_option, states
from runner.exit_codes import ExitCode, exits
from runner.job.model import is_loopback
from runner.state.locations import StateLocation

SMTP_PASSWORD = "RUNNER_CONSOLE_SMTP_PASSWORD"


@click.command()
@state_option
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Where to listen; off this machine's loopback only with --cert and --key.")
@click.option("--port", type=click.IntRange(0, 65535), default=8600, show_default=True,
              help="0: any free port (the address is printed).")
@click.option("--cert", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="TLS certificate chain (PEM).")
@click.option("--key", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="TLS private key (PEM) of --cert.")
@click.option("--name", "site_name", metavar="HOST",
              help="The host name people open (the passkeys' relying party): default "
                   "localhost on loopback, else --host.")
@click.option("--approvers", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              multiple=True, help="More allowed-signers files whose passkeys may sign in (the "
                                  "executor's policy's and each kept plan's approvers do).")
@click.option("--moved", type=click.FloatRange(0, 1000), default=5.0, show_default=True,
              help="Pay that moved by more than this percent since the batch before is "
                   "listed.")
@click.option("--mail-from", metavar="ADDRESS",
              help="Tell planners of each approval and denial, from this address.")
@click.option("--smtp-host", metavar="HOST", default="localhost", show_default=True)
@click.option("--smtp-port", type=int, default=587, show_default=True)
@click.option("--smtp-user", metavar="USER", help=f"Login (the password from ${SMTP_PASSWORD}).")
@click.option("--smtp-plain", is_flag=True,
              help="Plain SMTP (a mail server on this machine only); else STARTTLS.")
@reports_errors
@states(exits((ExitCode.OK, "stopped by Ctrl-C"),
              (ExitCode.USAGE, "off loopback without TLS, or a bad option"),
              ExitCode.STATE_UNUSABLE))
def console(state: StateLocation | None, host: str, port: int, cert: Path | None,
            key: Path | None, site_name: str | None, approvers: tuple[Path, ...],
            moved: float, mail_from: str | None, smtp_host: str, smtp_port: int,
            smtp_user: str | None, smtp_plain: bool) -> None:
    """Serve the console: plans to review and approve, in a browser, over the state.

    Planners and approvers sign in with a passkey, read each plan (totals per currency and
    balance, what changed since the batch before, held payees and duplicates, every item
    with search, sort and pages, each person's earlier payments), and approve it, deny it
    with a reason, or accept a held payee: each a WebAuthn assertion over exactly what is
    decided, which `runner apply` checks offline beside SSH signatures. A passkey is
    registered at /register: its line goes into the passkeys file beside the approvers
    file (approvers.passkeys), reviewed like it. The console never holds the provider's
    credentials: the executor applies. It listens on 127.0.0.1 unless told otherwise, and
    off loopback only over TLS (--cert, --key). EXITS

    \b
    Example:
      runner console --state state/payroll.sqlite
      RUNNER_CONSOLE_URL=https://pay.example.com runner console --host 0.0.0.0 \\
          --port 443 --cert pay.pem --key pay.key --name pay.example.com
    """
    import os

    from runner.extras import require

    require("console", "runner console")
    import uvicorn

    from runner.console.app import Console, build
    from runner.console.notify import Notifier
    from runner.console.signing import Site
    from runner.job.model import Email
    from runner.state import open_state

    if (cert is None) != (key is None):
        raise click.UsageError("--cert and --key go together")
    if not is_loopback(host) and cert is None:
        raise click.UsageError(f"--host {host} is off this machine's loopback: the console "
                               "is served there only over TLS (--cert and --key)")
    name = site_name or ("localhost" if is_loopback(host) else host)
    listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError as exc:
        raise click.UsageError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    listener.listen(64)
    bound = listener.getsockname()[1]
    scheme = "https" if cert is not None else "http"
    default_port = 443 if scheme == "https" else 80
    origin = f"{scheme}://{name}{'' if bound == default_port else f':{bound}'}"
    store = open_state(location_of(state))
    notifier = None
    if mail_from:
        email = Email.model_validate({
            "to": [mail_from], "from": mail_from, "smtp": {
                "host": smtp_host, "port": smtp_port, "starttls": not smtp_plain,
                "username": smtp_user,
                "password": os.environ.get(SMTP_PASSWORD) if smtp_user else None}})
        notifier = Notifier(email, store, state_dir_of(state))
    app = build(Console(store, Site(origin, name, approvers), Decimal(str(moved)), notifier))
    click.echo(f"console at {origin} (state {store.location}); Ctrl-C stops it", err=True)
    config = uvicorn.Config(app, log_level="warning", ssl_certfile=cert, ssl_keyfile=key,
                            access_log=False, lifespan="off", timeout_graceful_shutdown=5)
    try:
        uvicorn.Server(config).run(sockets=[listener])
    finally:
        store.close()
        listener.close()
