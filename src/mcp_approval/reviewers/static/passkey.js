// The console's passkey ceremonies: registering a passkey, and deciding a request that needs one.
// Served from the console's own origin (the pages' Content-Security-Policy allows no other script).
"use strict";
(function () {
  function toBytes(text) {
    const padded = text.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((text.length + 3) % 4);
    return Uint8Array.from(atob(padded), (c) => c.charCodeAt(0)).buffer;
  }
  function toText(buffer) {
    let binary = "";
    new Uint8Array(buffer).forEach((b) => { binary += String.fromCharCode(b); });
    return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }
  function csrf() {
    return document.querySelector('meta[name="csrf"]').content;
  }
  async function post(url, body) {
    const response = await fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf() },
      body: JSON.stringify(body),
    });
    const answer = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(answer.detail || "the server answered " + response.status);
    return answer;
  }
  function descriptors(list) {
    return (list || []).map((d) => Object.assign({}, d, { id: toBytes(d.id) }));
  }
  function asJson(credential) {
    const r = credential.response;
    const response = { clientDataJSON: toText(r.clientDataJSON) };
    if (r.attestationObject) {
      response.attestationObject = toText(r.attestationObject);
      response.transports = r.getTransports ? r.getTransports() : [];
    } else {
      response.authenticatorData = toText(r.authenticatorData);
      response.signature = toText(r.signature);
      if (r.userHandle) response.userHandle = toText(r.userHandle);
    }
    return {
      id: credential.id,
      rawId: toText(credential.rawId),
      type: credential.type,
      response: response,
      clientExtensionResults: credential.getClientExtensionResults(),
    };
  }
  async function register(base) {
    const options = await post(base + "/passkeys/options", {});
    options.challenge = toBytes(options.challenge);
    options.user.id = toBytes(options.user.id);
    options.excludeCredentials = descriptors(options.excludeCredentials);
    const credential = await navigator.credentials.create({ publicKey: options });
    return post(base + "/passkeys", { credential: asJson(credential) });
  }
  // An assertion for one decision on the request at `url` (its passkey page's address).
  async function assertion(url, decision) {
    const options = await post(url + "/options", { decision: decision });
    options.challenge = toBytes(options.challenge);
    options.allowCredentials = descriptors(options.allowCredentials);
    return asJson(await navigator.credentials.get({ publicKey: options }));
  }
  function decide(url, decision, comment, credential) {
    return post(url + "/decide", { decision: decision, comment: comment, credential: credential });
  }
  function fail(error) {
    const box = document.getElementById("passkey-error");
    box.textContent = "Nothing was recorded: " + (error && error.message ? error.message : error);
    box.hidden = false;
  }
  window.mcpApprovalPasskeys = { assertion: assertion, decide: decide, register: register };
  document.addEventListener("DOMContentLoaded", function () {
    const root = document.getElementById("passkey");
    if (!root) return;
    const registerButton = document.getElementById("register-passkey");
    if (registerButton) {
      registerButton.addEventListener("click", function () {
        register(root.dataset.base).then(() => window.location.reload(), fail);
      });
    }
    document.querySelectorAll("button[data-decision]").forEach(function (button) {
      button.addEventListener("click", function () {
        const url = root.dataset.request;
        const decision = button.dataset.decision;
        const comment = document.getElementById("comment").value;
        assertion(url, decision)
          .then((credential) => decide(url, decision, comment, credential))
          .then((answer) => { window.location.href = answer.location; }, fail);
      });
    });
  });
})();
