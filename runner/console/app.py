"""The console's web application (Starlette): server-rendered pages over the state, escaped
by Jinja's autoescape, and the few JSON calls the passkey script makes.

Pages: ``/`` the plans (waiting, approved, denied, applied), ``/plans/{id}`` one plan (its
totals and balances, the changes since the batch before, the held payees and duplicates,
its items searched, sorted and paged), ``/plans/{id}/people/{key}`` one person's earlier
payments, ``/plans/{id}/file`` the plan file with every signature (for `runner show` and
`runner apply` elsewhere), ``/activity`` who did what, ``/sign-in`` and ``/register``.

Safe to expose: a session cookie (signed, HttpOnly, SameSite=Strict, Secure over TLS); every
call that changes something is a POST carrying the session's CSRF token in a header and
coming from the console's own origin; pages are sent with a content security policy that
runs only the console's own script, and never hold a secret (the provider's credentials
are not read here at all).
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from functools import partial
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from runner.console import signing, views
from runner.console.notify import Notifier
from runner.errors import ConsoleRefused, SigningError
from runner.state import StateStore

SESSION_HOURS = 8
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
                               "img-src 'self'; connect-src 'self'; form-action 'self'; "
                               "base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


@dataclass
class Console:
    """What the pages share: the state, where the console is, and how it tells people."""

    state: StateStore
    site: signing.Site
    moved_percent: Decimal = Decimal(5)
    notifier: Notifier | None = None
    clock: Any = field(default=lambda: datetime.now(UTC))
    templates: Environment = field(default_factory=lambda: Environment(
        loader=PackageLoader("runner.console", "templates"),
        autoescape=select_autoescape(("html", "j2"), default=True)))

    def page(self, request: Request, name: str, status: int = 200,
             **context: Any) -> HTMLResponse:
        user = signing.user_of(request.session)
        html = self.templates.get_template(name).render(
            user=None if user is None else user.principal, csrf=_csrf(request),
            **context)
        return HTMLResponse(html, status, headers=HEADERS)


def _csrf(request: Request) -> str:
    token = request.session.get("csrf")
    if not isinstance(token, str):
        token = request.session["csrf"] = secrets.token_urlsafe(24)
    return token


def _checked(console: Console, request: Request) -> None:
    """A POST comes from the console's own page: its origin, and the session's token."""
    origin = request.headers.get("origin")
    if origin is not None and origin != console.site.origin:
        raise ConsoleRefused(f"a call from {origin} is not the console's")
    token = request.session.get("csrf")
    if not token or not secrets.compare_digest(str(token),
                                               request.headers.get("x-csrf-token", "")):
        raise ConsoleRefused("the page is out of date (its token does not match): reload it")


async def _body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if len(raw) > 64 << 10:
        raise ConsoleRefused("the call is too large")
    try:
        found = json.loads(raw or b"{}")
    except ValueError:
        raise ConsoleRefused("the call is not JSON") from None
    if not isinstance(found, dict):
        raise ConsoleRefused("the call is not a JSON object")
    return found


def _error(text: str, status: int = 400) -> JSONResponse:
    return JSONResponse({"error": text}, status, headers=HEADERS)


def build(console: Console) -> Starlette:
    """The console's application."""
    c = console

    def signed_in(request: Request) -> signing.User | None:
        return signing.user_of(request.session)

    async def index(request: Request) -> Response:
        if signed_in(request) is None:
            return RedirectResponse("/sign-in", 303, headers=HEADERS)
        rows = await run_in_threadpool(views.plan_rows, c.state, c.clock())
        return c.page(request, "index.html.j2", plans=rows)

    async def plan_page(request: Request) -> Response:
        if signed_in(request) is None:
            return RedirectResponse(f"/sign-in?next=/plans/{request.path_params['id']}", 303,
                                    headers=HEADERS)
        record = await run_in_threadpool(c.state.plans.head, request.path_params["id"])
        if record is None:
            return c.page(request, "missing.html.j2", 404, what="plan")
        q = request.query_params
        try:
            page = int(q.get("page", "1"))
        except ValueError:
            page = 1
        view = await run_in_threadpool(partial(
            views.plan_view, record, c.state, c.clock(), c.moved_percent, q.get("q", ""),
            q.get("sort", "row"), q.get("order") == "desc", page))
        return c.page(request, "plan.html.j2", plan=view)

    async def plan_file(request: Request) -> Response:
        if signed_in(request) is None:
            return _error("sign in first", 403)
        record = c.state.plans.head(request.path_params["id"])
        if record is None:
            return _error("no such plan", 404)
        content = views.content_of(record, c.state)
        return Response(json.dumps(content, indent=1) + "\n", headers={
            **HEADERS, "Content-Disposition": f'attachment; filename="{record.job_name}'
                                              f'.plan.json"'},
            media_type="application/json")

    async def person(request: Request) -> Response:
        if signed_in(request) is None:
            return RedirectResponse("/sign-in", 303, headers=HEADERS)
        record = c.state.plans.head(request.path_params["id"])
        if record is None:
            return c.page(request, "missing.html.j2", 404, what="plan")
        view = await run_in_threadpool(views.person_view, c.state, record,
                                       request.path_params["key"])
        return c.page(request, "person.html.j2", person=view)

    async def activity(request: Request) -> Response:
        if signed_in(request) is None:
            return RedirectResponse("/sign-in", 303, headers=HEADERS)
        return c.page(request, "activity.html.j2", events=c.state.plans.events())

    async def sign_in_page(request: Request) -> Response:
        return c.page(request, "sign_in.html.j2", next=_next(request))

    async def register_page(request: Request) -> Response:
        return c.page(request, "register.html.j2")

    async def call(request: Request) -> Response:
        """The passkey script's calls: ``/api/{act}``."""
        act = request.path_params["act"]
        try:
            _checked(c, request)
            body = await _body(request)
            return await run_in_threadpool(_act, request, act, body)
        except ConsoleRefused as exc:
            return _error(str(exc), 403 if "sign in" in str(exc) else 400)
        except SigningError as exc:
            return _error(str(exc))

    def _act(request: Request, act: str, body: dict[str, Any]) -> Response:
        session, now = request.session, c.clock()
        if act == "register-options":
            return _options(signing.register_options(c.site, session,
                                                     str(body.get("name", ""))))
        if act == "register":
            line = signing.register_done(c.site, session, _credential(body))
            return JSONResponse({"line": line}, headers=HEADERS)
        if act == "sign-in-options":
            return _options(signing.sign_in_options(c.site, c.state, session,
                                                    str(body.get("name", "")), now))
        if act == "sign-in":
            signing.sign_in_done(c.site, c.state, session, _credential(body), now)
            return JSONResponse({"next": _safe_next(str(body.get("next", "/")))},
                                headers=HEADERS)
        user = signing.user_of(session)
        if user is None:
            raise ConsoleRefused("sign in first")
        if act == "sign-out":
            signing.note(c.state, user, "signed out", "", "")
            session.clear()
            return JSONResponse({"next": "/sign-in"}, headers=HEADERS)
        plan_id = str(body.get("plan", ""))
        if act == "decide-options":
            return _options(signing.decide_options(
                c.site, c.state, session, user, plan_id, str(body.get("decision", "")),
                str(body.get("reason", "")), now))
        if act == "decide":
            entry = signing.decide_done(c.state, session, user, plan_id, _credential(body),
                                        now)
            if c.notifier is not None:
                c.notifier.decided(plan_id, user.principal, entry)
            return JSONResponse({"done": entry["role"]}, headers=HEADERS)
        if act == "accept-options":
            return _options(signing.accept_options(
                c.site, c.state, session, user, plan_id, str(body.get("external_id", "")),
                str(body.get("note", "")), now))
        if act == "accept":
            accepted = signing.accept_done(c.state, session, user, plan_id,
                                           _credential(body), now)
            return JSONResponse({"done": "accepted", "name": accepted.name},
                                headers=HEADERS)
        raise ConsoleRefused(f"no such call: {act}")

    routes = [
        Route("/", index), Route("/plans/{id}", plan_page),
        Route("/plans/{id}/file", plan_file),
        Route("/plans/{id}/people/{key}", person), Route("/activity", activity),
        Route("/sign-in", sign_in_page), Route("/register", register_page),
        Route("/api/{act}", call, methods=["POST"]),
        Mount("/static", StaticFiles(packages=[("runner.console", "static")]), name="static"),
    ]
    secure = console.site.origin.startswith("https://")
    return Starlette(routes=routes, middleware=[Middleware(
        SessionMiddleware, secret_key=secrets.token_urlsafe(32), session_cookie="console",
        max_age=SESSION_HOURS * 3600, same_site="strict", https_only=secure)])


def _options(text: str) -> Response:
    return Response(text, headers=HEADERS, media_type="application/json")


def _credential(body: dict[str, Any]) -> dict[str, Any]:
    credential = body.get("credential")
    if not isinstance(credential, dict):
        raise ConsoleRefused("the passkey gave no credential")
    return credential


def _next(request: Request) -> str:
    return _safe_next(request.query_params.get("next", "/"))


def _safe_next(target: str) -> str:
    """Only a page of the console itself (never another site)."""
    return target if target.startswith("/") and not target.startswith("//") and \
        "\\" not in target else "/"
