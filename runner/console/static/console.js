// The console's passkey calls: WebAuthn in the browser, checked by the server.
"use strict";

function fromB64url(text) {
  const s = text.replace(/-/g, "+").replace(/_/g, "/");
  const raw = atob(s + "=".repeat((4 - (s.length % 4)) % 4));
  return Uint8Array.from(raw, (c) => c.charCodeAt(0)).buffer;
}

function toB64url(buffer) {
  const bytes = new Uint8Array(buffer);
  let raw = "";
  for (const b of bytes) raw += String.fromCharCode(b);
  return btoa(raw).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function say(text, bad) {
  const box = document.getElementById("message");
  box.textContent = text;
  box.className = bad ? "message bad" : "message";
  box.hidden = false;
}

async function call(act, body) {
  const token = document.querySelector('meta[name="csrf"]').content;
  const answer = await fetch("/api/" + act, {
    method: "POST", credentials: "same-origin",
    headers: {"Content-Type": "application/json", "X-CSRF-Token": token},
    body: JSON.stringify(body),
  });
  const found = await answer.json();
  if (!answer.ok) throw new Error(found.error || answer.statusText);
  return found;
}

function credentialJSON(c) {
  const r = c.response;
  const out = {id: c.id, rawId: toB64url(c.rawId), type: c.type,
               response: {clientDataJSON: toB64url(r.clientDataJSON)},
               clientExtensionResults: c.getClientExtensionResults()};
  if (r.attestationObject) {
    out.response.attestationObject = toB64url(r.attestationObject);
    out.response.transports = r.getTransports ? r.getTransports() : [];
  } else {
    out.response.authenticatorData = toB64url(r.authenticatorData);
    out.response.signature = toB64url(r.signature);
    if (r.userHandle) out.response.userHandle = toB64url(r.userHandle);
  }
  return out;
}

async function assertion(act, body) {
  const options = await call(act + "-options", body);
  options.challenge = fromB64url(options.challenge);
  for (const c of options.allowCredentials || []) c.id = fromB64url(c.id);
  const made = await navigator.credentials.get({publicKey: options});
  return call(act, {...body, credential: credentialJSON(made)});
}

async function register(event) {
  event.preventDefault();
  const name = event.target.elements.name.value;
  try {
    const options = await call("register-options", {name});
    options.challenge = fromB64url(options.challenge);
    options.user.id = fromB64url(options.user.id);
    for (const c of options.excludeCredentials || []) c.id = fromB64url(c.id);
    const made = await navigator.credentials.create({publicKey: options});
    const done = await call("register", {credential: credentialJSON(made)});
    document.getElementById("line").textContent = done.line;
    document.getElementById("registered").hidden = false;
    say("Your passkey is made: add its line to the passkeys file.");
  } catch (error) { say(error.message, true); }
}

async function signIn(event) {
  event.preventDefault();
  const form = event.target;
  try {
    const done = await assertion("sign-in", {name: form.elements.name.value,
                                             next: form.dataset.next});
    window.location.assign(done.next);
  } catch (error) { say(error.message, true); }
}

async function decide(plan, decision, reason) {
  try {
    await assertion("decide", {plan, decision, reason});
    window.location.reload();
  } catch (error) { say(error.message, true); }
}

async function accept(button) {
  try {
    const done = await assertion("accept", {plan: button.dataset.plan,
                                            external_id: button.dataset.externalId});
    button.replaceWith(document.createTextNode("accepted: " + done.name));
    say("Accepted: " + done.name + ". The next plan pays them.");
  } catch (error) { say(error.message, true); }
}

document.addEventListener("DOMContentLoaded", () => {
  const on = (selector, type, handler) =>
    document.querySelectorAll(selector).forEach((n) => n.addEventListener(type, handler));
  on("#register", "submit", register);
  on("#sign-in", "submit", signIn);
  on("button.approve", "click",
     (e) => decide(e.target.dataset.plan, e.target.dataset.decision, ""));
  on("form.deny", "submit", (e) => {
    e.preventDefault();
    decide(e.target.dataset.plan, "deny", e.target.elements.reason.value);
  });
  on("button.accept", "click", (e) => accept(e.target));
  on("#sign-out", "click", async () => {
    await call("sign-out", {}).catch(() => null);
    window.location.assign("/sign-in");
  });
});
