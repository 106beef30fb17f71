// The reference client of /v1/ws (docs/websocket.md). No build step, no dependencies.
"use strict";

const $ = (id) => document.getElementById(id);
const state = {
  ws: null, session: null, lastSeq: {}, parts: new Map(), retry: 0,
  token: new URLSearchParams(location.search).get("token") || sessionStorage.getItem("bridge-token") || "",
};
$("token").value = state.token;
$("token").addEventListener("change", () => {
  state.token = $("token").value.trim();
  sessionStorage.setItem("bridge-token", state.token);
  if (state.ws) state.ws.close();
  else connect();
});
$("refresh").addEventListener("click", () => send({ op: "sessions" }));

function send(op) {
  if (state.ws && state.ws.readyState === WebSocket.OPEN) state.ws.send(JSON.stringify(op));
}

function connect() {
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  const q = state.token ? "?token=" + encodeURIComponent(state.token) : "";
  const ws = new WebSocket(proto + "//" + location.host + "/v1/ws" + q);
  state.ws = ws;
  $("conn").textContent = "connecting…";
  ws.onopen = () => { state.retry = 0; $("conn").textContent = "connected"; };
  ws.onmessage = (e) => handle(JSON.parse(e.data));
  ws.onclose = (e) => {
    state.ws = null;
    $("conn").textContent = "closed (" + e.code + (e.reason ? " " + e.reason : "") + ")";
    if (e.code === 4401) return; // a new token is needed: wait for the token field
    const delay = Math.min(5000, 250 * 2 ** state.retry++);
    setTimeout(connect, delay);
  };
}

function handle(m) {
  switch (m.type) {
    case "hello": {
      send({ op: "sessions" });
      const wanted = new URLSearchParams(location.search).get("session");
      if (state.session) subscribe(state.session, true);
      else if (wanted) select(wanted);
      break;
    }
    case "sessions": renderSessions(m.sessions); break;
    case "subscribed":
      $("status").textContent = m.session + " · status " + (m.status || "?") + " · head " + m.head +
        (m.complete ? "" : " · history incomplete");
      break;
    case "event": if (m.session === state.session) onEvent(m); break;
    case "delta": if (m.session === state.session) onDelta(m); break;
    case "permission": if (m.session === state.session) onPermission(m); break;
    case "status":
      if (m.session === state.session) $("status").textContent = m.session + " · status " + m.status + (m.reason ? " (" + m.reason + ")" : "");
      break;
    case "error": add("error", "bridge error " + m.code + ": " + m.message); break;
  }
}

function renderSessions(list) {
  const ul = $("sessions");
  ul.textContent = "";
  for (const s of list) {
    const li = document.createElement("li");
    li.textContent = s.session + " (" + (s.status || "?") + ")";
    li.dataset.session = s.session;
    if (s.session === state.session) li.className = "selected";
    li.onclick = () => select(s.session);
    ul.appendChild(li);
  }
}

function select(sid) {
  if (state.session && state.session !== sid) send({ op: "unsubscribe", session: state.session });
  state.session = sid;
  state.parts = new Map();
  delete state.lastSeq[sid];
  $("transcript").textContent = "";
  for (const li of $("sessions").children) li.className = li.dataset.session === sid ? "selected" : "";
  subscribe(sid, false);
}

function subscribe(sid, resume) {
  const op = { op: "subscribe", session: sid };
  if (resume && state.lastSeq[sid] !== undefined) op.after = state.lastSeq[sid];
  send(op);
}

function add(cls, text, key) {
  const div = document.createElement("div");
  div.className = "msg " + cls;
  div.textContent = text;
  if (key) div.dataset.key = key;
  $("transcript").appendChild(div);
  div.scrollIntoView({ block: "end" });
  return div;
}

// One element per streamed part, keyed by (assistant message, part or call id): deltas append, the
// durable *:end replaces the content with the whole text (docs/websocket.md §3).
function part(kind, key) {
  const k = kind + ":" + key;
  let p = state.parts.get(k);
  if (!p) {
    p = { el: add(kind + " streaming", "", k), ended: false };
    state.parts.set(k, p);
  }
  return p;
}

function onDelta(m) {
  const kind = m.kind === "delta:text" ? "text" : m.kind === "delta:reasoning" ? "reasoning" : "tool-input";
  if (kind === "tool-input") return; // shown whole on tool:start
  const p = part(kind, (m.assistant_message_id || "") + "/" + (m.part_id || ""));
  if (!p.ended) p.el.textContent += m.delta;
}

function onEvent(m) {
  state.lastSeq[m.session] = m.seq;
  const f = m.fields || {};
  const d = m.data || {};
  switch (m.kind) {
    case "prompt:started": add("user", f.text || ""); break;
    case "text:start": part("text", (f.assistant_message_id || "") + "/" + (f.part_id || "")); break;
    case "reasoning:start": part("reasoning", (f.assistant_message_id || "") + "/" + (f.part_id || "")); break;
    case "text:end":
    case "reasoning:end": {
      const p = part(m.kind.split(":")[0], (f.assistant_message_id || "") + "/" + (f.part_id || ""));
      p.el.textContent = f.text || "";
      p.ended = true;
      p.el.classList.remove("streaming");
      p.el.classList.add("ended");
      break;
    }
    case "tool:start":
      add("tool", "▶ " + (f.tool_name || "tool") + " " + JSON.stringify(d.input || {}), "tool:" + f.call_id);
      break;
    case "tool:success": {
      const out = (d.content || []).filter((c) => c && c.type === "text").map((c) => c.text).join("");
      add("tool", "✔ " + out, "tool-out:" + f.call_id);
      break;
    }
    case "tool:fail":
    case "step:fail":
      add("error", (f.error_type ? f.error_type + ": " : "") + (f.error_message || "error"));
      break;
    case "step:end":
      if (f.finish && f.finish !== "tool-calls") add("meta", "turn step finished: " + f.finish);
      break;
  }
}

function onPermission(m) {
  const key = "perm:" + m.request_id;
  let el = document.querySelector('[data-key="' + CSS.escape(key) + '"]');
  if (!el) el = add("permission", "", key);
  if (m.state === "asked") {
    el.textContent = "⚠ permission pending: " + (m.action || "") + " " + JSON.stringify((m.data || {}).resources || []);
  } else {
    el.textContent = "permission " + m.request_id + " answered: " + m.reply;
    el.classList.add("replied");
  }
}

connect();
