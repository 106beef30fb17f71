"use strict";
// The viewer's controls (docs/commands.md): a composer (Send now = steer, Queue = queue), a Stop button,
// permission buttons and the Answer / Reject buttons of a question, over the WebSocket `command` op. Shown only when the token's scope (from `hello`)
// allows them. Text goes into the page with textContent only. Commands go through the package's
// BridgeSocket: one not answered when the socket drops is sent again with the same command_id after the
// reconnect, so the bridge runs it at most once.

const composer = (() => {
  const RANK = { read: 0, prompt: 1, control: 2 };
  let scope = "read";
  let approve = "none"; // the token's right to answer permissions (docs/security.md): none | once | always
  let granted = null; // the token's sessions (null: all), from `hello`
  let session = state.selected; // viewer.js may have selected one before this file ran
  // Prompts waiting in the bridge's legacy queue (docs/commands.md): command_id -> text, until sent.
  const queued = new Map();

  function renderQueued() {
    const list = $("queued");
    list.textContent = "";
    for (const [id, text] of queued) {
      const li = el("li", "queued-prompt", "queued: " + (text || id));
      li.dataset.commandId = id;
      list.appendChild(li);
    }
    list.hidden = queued.size === 0;
  }

  function may(need) { return (RANK[scope] || 0) >= RANK[need]; }

  function commandId() {
    if (window.crypto && crypto.randomUUID) return "viewer-" + crypto.randomUUID();
    return "viewer-" + Date.now().toString(36) + "-" + Math.random().toString(36).slice(2);
  }

  function say(text) { $("composer-status").textContent = text; }

  function run(command, fields, label) {
    const p = { label: label, text: fields.text };
    say(label + "…");
    state.sock.command(command, Object.assign({ command_id: commandId() }, fields))
      .then((m) => result(p, m), (e) => say(label + " failed: " + e.message));
  }

  function result(p, m) {
    const isQueued = m.result && m.result.state === "queued"; // the bridge's legacy queue (docs/commands.md)
    if (m.status < 300 && isQueued) {
      say("queued: sent when the running turn ends");
      queued.set(m.result.command_id, p.text || "");
      renderQueued();
    }
    else if (m.status < 300) say(p.label.replace(/ing$/, "") + ": done");
    else say(p.label + " failed: " + (errorCode(m.error) || m.status) + (errorMessage(m) ? " — " + errorMessage(m) : ""));
  }

  // Either error shape (a code and a message beside it, or one envelope {code, message}).
  function errorCode(e) { return e && typeof e === "object" ? e.code : e; }
  function errorMessage(m) { return m.message || (m.error && typeof m.error === "object" ? m.error.message : ""); }

  function prompt(delivery) {
    const box = $("prompt-text");
    const text = box.value.trim();
    if (!text || !session) return;
    run("prompt", { session: session, text: text, delivery: delivery }, delivery === "steer" ? "sending" : "queueing");
    box.value = "";
  }

  function render() {
    const mine = session && (granted === null || granted.includes(session));
    $("composer").hidden = !(mine && may("prompt"));
    $("stop").hidden = !may("control");
  }

  $("send-now").addEventListener("click", () => prompt("steer"));
  $("send-queue").addEventListener("click", () => prompt("queue"));
  $("stop").addEventListener("click", () => { if (session) run("interrupt", { session: session }, "stopping"); });
  $("prompt-text").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); prompt(e.shiftKey ? "queue" : "steer"); }
  });

  render();
  return {
    hello(m) {
      scope = m.scope || "read";
      approve = m.approve || "none";
      granted = Array.isArray(m.sessions) ? m.sessions : null;
      render();
    },
    select(sid) { session = sid; say(""); queued.clear(); renderQueued(); render(); },
    // `command` frames: a queued prompt of this session was queued (by anyone), sent or dropped.
    commandState(m) {
      if (m.session !== session) return;
      if (m.state === "queued") queued.set(m.command_id, queued.get(m.command_id) || "");
      else if (queued.delete(m.command_id)) say("queued prompt " + m.state);
      renderQueued();
    },
    // Buttons under a pending permission request, for tokens that may answer it.
    permissionButtons(box, sid, requestId) {
      if (!may("prompt")) return false;
      const row = el("span", "perm-actions");
      // Only the answers this token may send (the bridge refuses the others anyway).
      const replies = approve === "always" ? ["once", "always", "reject"] : approve === "once" ? ["once", "reject"]
        : ["reject"];
      for (const reply of replies) {
        const b = el("button", "perm-" + reply, reply === "once" ? "Allow once" : reply === "always" ? "Always" : "Reject");
        b.addEventListener("click", () => {
          for (const x of row.children) x.disabled = true;
          run("permission_reply", { session: sid, request_id: requestId, reply: reply }, "answering");
        });
        row.appendChild(b);
      }
      box.appendChild(row);
      return true;
    },
    // Answer and Reject under a pending question (questions.js); `answers()` reads the card's form.
    questionButtons(card, sid, requestId, answers) {
      if (!may("prompt")) return false;
      const row = el("span", "perm-actions q-actions");
      const ok = el("button", "q-answer-button", "Answer");
      const no = el("button", "q-reject-button", "Reject");
      ok.addEventListener("click", () => {
        const a = answers();
        if (!a) { say("choose an answer for every question"); return; }
        ok.disabled = no.disabled = true;
        run("question_reply", { session: sid, request_id: requestId, answers: a }, "answering");
      });
      no.addEventListener("click", () => {
        ok.disabled = no.disabled = true;
        run("question_reject", { session: sid, request_id: requestId }, "rejecting");
      });
      row.append(ok, no);
      card.appendChild(row);
      return true;
    },
  };
})();
