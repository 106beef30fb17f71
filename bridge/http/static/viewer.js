// The built-in viewer: the reference client of /v1/ws (docs/websocket.md) and of the audit API's session
// list (docs/audit.md), built on the project's client package (boot.js loads it as `bridgeLib`): its
// BridgeSocket keeps the connection (token, reconnects, resume, commands), its SessionState folds the
// selected session's frames (questions and permissions by request id), its BridgeClient reads the REST
// routes. Data only ever reaches the page as textContent.
"use strict";

const $ = (id) => document.getElementById(id);

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

const state = {
  token: new URLSearchParams(location.search).get("token") || sessionStorage.getItem("bridge-token") || "",
  sock: null, connected: false,
  sessions: new Map(), // session id -> row (audit API fields, kept fresh by WS status)
  selected: null, view: null,
  model: null, // the selected session's bridgeLib.SessionState
  api: new bridgeLib.BridgeClient({ baseUrl: location.origin, token: () => state.token }),
};
if (state.token) sessionStorage.setItem("bridge-token", state.token);
// The token leaves the address bar once read (docs/security.md): not in history, bookmarks, screenshots or
// a link copied from the bar. It stays in this tab's sessionStorage.
(function dropTokenFromAddress() {
  const params = new URLSearchParams(location.search);
  if (!params.has("token")) return;
  params.delete("token");
  const rest = params.toString();
  history.replaceState(history.state, "", location.pathname + (rest ? "?" + rest : "") + location.hash);
})();

// --- formatting ---------------------------------------------------------------------------------------

function ago(iso) {
  if (!iso) return "no activity";
  const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (s < 10) return "just now";
  if (s < 60) return Math.round(s) + " s ago";
  if (s < 3600) return Math.round(s / 60) + " min ago";
  if (s < 86400) return Math.round(s / 3600) + " h ago";
  return new Date(iso).toISOString().slice(0, 10);
}

function duration(ms) {
  if (ms === null || ms === undefined || ms < 0) return "";
  return ms < 1000 ? ms + " ms" : (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + " s";
}

function tail(text, n) { return text.length > n ? "…" + text.slice(text.length - n + 1) : text; }

function money(cost) { return cost ? "$" + cost.toFixed(4) : "$0"; }

function shortId(sid) { return sid.length > 18 ? sid.slice(0, 10) + "…" + sid.slice(-6) : sid; }

function titleOf(row) {
  // opencode's v2 sessions keep the default title ("New session - <ISO>"); the mirror stores none: the id.
  return row.title || shortId(row.session_id);
}

function retryAt(row) {
  const at = row.retry_at ?? row.next_retry_at ?? null;
  if (at !== null) return typeof at === "number" ? (at > 1e12 ? at : at * 1000) : Date.parse(at);
  // The bridge's `retrying` reason names the next attempt's time (docs/lifecycle.md):
  // "attempt 2, next in 8 s (2026-12-01T09:30:08Z): <upstream message>".
  const m = /\((\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)\)/.exec(row.status_reason || "");
  return m ? Date.parse(m[1]) : null;
}

function statusOf(row) {
  if (row.deleted) return "deleted";
  return row.status || "unknown";
}

function statusLabel(row) {
  const st = statusOf(row);
  if (st === "retrying") {
    const at = retryAt(row);
    const left = at === null ? null : Math.max(0, Math.ceil((at - Date.now()) / 1000));
    return left === null ? "retrying" : "retrying in " + left + " s";
  }
  // `waiting`: the reason says what for, "question since 2026-12-01T21:10:22Z" (docs/lifecycle.md).
  if (st === "waiting") return "waiting for " + ((row.status_reason || "").split(" since ")[0] || "an answer");
  return st;
}

function badge(row) {
  const b = el("span", "badge status-" + statusOf(row), statusLabel(row));
  if (row.status_reason) b.title = row.status_reason;
  return b;
}

function outputText(d) {
  const texts = (Array.isArray(d.content) ? d.content : []).filter((c) => c && c.type === "text").map((c) => c.text);
  if (texts.length) return texts.join("\n");
  const st = d.structured;
  if (st && typeof st.content === "string") return st.content; // tools like `read` return no text part
  return st ? JSON.stringify(st, null, 2) : "";
}

function pretty(v) {
  if (typeof v === "string") {
    try { return JSON.stringify(JSON.parse(v), null, 2); } catch (e) { return v; }
  }
  return JSON.stringify(v, null, 2);
}

// --- connection ---------------------------------------------------------------------------------------

$("token").value = state.token;
$("token").addEventListener("change", () => {
  state.token = $("token").value.trim();
  sessionStorage.setItem("bridge-token", state.token);
  if (state.sock) state.sock.close();
  connect();
  loadSessions();
});
$("refresh").addEventListener("click", () => { loadSessions(); send({ op: "sessions" }); });
$("filter").addEventListener("input", renderSessions);

// The controls of composer.js (loaded after this file; absent or hidden for a `read` token).
// (`composer` is also the <div id="composer"> until composer.js has run: only the object counts.)
function controls() { return typeof composer !== "undefined" && typeof composer.hello === "function" ? composer : null; }

function send(op) {
  if (state.sock) state.sock.sendOp(op);
}

function setConn(text, cls) {
  const c = $("conn");
  c.textContent = text;
  c.className = "pill " + (cls || "");
}

// One BridgeSocket per token: it reconnects with jitter, resubscribes the selected session from its last
// seq, and re-sends an unanswered command with the same command_id; a refused token (4401) stops it.
function connect() {
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  const sock = new bridgeLib.BridgeSocket({ url: proto + "//" + location.host + "/v1/ws", getToken: () => state.token,
    backoff: { baseMs: 250, maxMs: 5000 } });
  state.sock = sock;
  sock.on("state", (s) => {
    if (sock !== state.sock) return;
    state.connected = s === "connected";
    if (s === "connected") setConn("live", "connected");
    else if (s === "connecting") setConn("connecting…");
    else setConn("closed", "closed");
    if (s === "stopped") notice("The token was refused: paste one from `opencode-bridge token`.");
  });
  sock.on("*", (m) => { if (sock === state.sock) handle(m); });
  if (state.selected) sock.subscribe(state.selected, null);
  sock.connect();
}

function notice(text) {
  const n = $("notice");
  n.hidden = !text;
  n.textContent = text || "";
}

function handle(m) {
  const mine = m.session && m.session === state.selected && state.view;
  if (mine) state.model.apply(m);
  switch (m.type) {
    case "hello":
      $("upstream").textContent = m.upstream || "";
      if (controls()) controls().hello(m);
      send({ op: "sessions" });
      break;
    case "sessions": mergeWsSessions(m.sessions || []); break;
    case "subscribed":
      if (mine) state.view.subscribed(m);
      break;
    case "event":
      if (mine) state.view.event(m);
      break;
    case "delta": if (mine) state.view.delta(m); break;
    case "permission": if (mine) state.view.permission(m); break;
    case "question": if (mine) questionCards.show(state.view, state.model.questions.get(m.request_id) || m); break;
    case "status": {
      const row = state.sessions.get(m.session);
      if (row) { row.status = m.status; row.status_reason = m.reason || null; Object.assign(row, pick(m)); renderSessions(); }
      if (mine) state.view.status(m);
      break;
    }
    case "command": if (mine && controls()) controls().commandState(m); break; // a queued prompt's state
    case "error":
      if (mine || !m.session) notice("bridge error " + m.code + ": " + m.message);
      break;
  }
}

function pick(m) {
  const out = {};
  for (const k of ["retry_at", "next_retry_at", "attempt"]) if (k in m) out[k] = m[k];
  return out;
}

// --- session list (audit API; the WebSocket's `sessions` fills in when it cannot be read) -------------

async function loadSessions() {
  const rows = [];
  let after = null;
  try {
    for (let page = 0; page < 20; page++) {
      const r = await state.api.listSessions({ query: after ? { limit: 1000, after } : { limit: 1000 } });
      if (r.error !== undefined) throw new Error("HTTP " + (r.response ? r.response.status : "error"));
      const body = r.data;
      rows.push(...body.data);
      after = body.next;
      if (!after) break;
    }
  } catch (e) {
    notice(state.sessions.size ? "" : "Session list unavailable (" + e.message + ")");
    return;
  }
  notice("");
  const seen = new Set();
  for (const row of rows) {
    seen.add(row.session_id);
    state.sessions.set(row.session_id, Object.assign(state.sessions.get(row.session_id) || {}, row));
  }
  for (const sid of [...state.sessions.keys()]) if (!seen.has(sid) && !state.sessions.get(sid).fromWs) state.sessions.delete(sid);
  renderSessions();
}

function mergeWsSessions(list) {
  for (const s of list) {
    const row = state.sessions.get(s.session) || { session_id: s.session, fromWs: true };
    row.status = s.status || row.status;
    row.cursor_seq = s.head;
    row.title = s.title || row.title;
    row.last_event_at = s.last_event_at || row.last_event_at;
    row.parent_id = s.parent_id || row.parent_id;
    state.sessions.set(s.session, row);
  }
  renderSessions();
}

function matches(row, q) {
  if (!q) return true;
  const hay = [row.session_id, row.title, row.directory, statusOf(row)].filter(Boolean).join(" ").toLowerCase();
  return q.split(/\s+/).every((w) => hay.includes(w));
}

// Subagent sessions under their parent (`parent_id`, docs/upstream.md §20), each level by activity: rows
// in, [row, depth] out. A child whose parent is not listed (filtered out, not readable) stands on its own.
function nestedOrder(rows) {
  const ids = new Set(rows.map((r) => r.session_id));
  const kids = new Map();
  const roots = [];
  for (const r of rows) {
    const p = r.parent_id;
    if (p && p !== r.session_id && ids.has(p)) {
      if (!kids.has(p)) kids.set(p, []);
      kids.get(p).push(r);
    } else roots.push(r);
  }
  const out = [];
  const seen = new Set();
  const walk = (r, depth) => {
    if (seen.has(r.session_id)) return;
    seen.add(r.session_id);
    out.push([r, depth]);
    for (const k of kids.get(r.session_id) || []) walk(k, Math.min(depth + 1, 6));
  };
  for (const r of roots) walk(r, 0);
  for (const r of rows) walk(r, 0); // parents in a loop (never from opencode): shown, not lost
  return out;
}

function renderSessions() {
  const q = $("filter").value.trim().toLowerCase();
  const rows = [...state.sessions.values()].sort((a, b) =>
    (Date.parse(b.last_event_at || b.created_at || 0) || 0) - (Date.parse(a.last_event_at || a.created_at || 0) || 0));
  const shown = rows.filter((r) => matches(r, q));
  const ul = $("sessions");
  ul.textContent = "";
  for (const [row, depth] of nestedOrder(shown)) {
    const li = el("li", (row.session_id === state.selected ? "session selected" : "session") + (depth ? " child" : ""));
    li.dataset.session = row.session_id;
    li.dataset.depth = String(depth);
    if (depth) {
      li.style.marginLeft = depth * 16 + "px";
      li.title = "subagent of " + row.parent_id;
    }
    li.dataset.status = statusOf(row);
    const top = el("div", "s-row");
    const title = el("span", "s-title", titleOf(row));
    title.title = row.session_id;
    top.append(title, badge(row));
    const dir = el("div", "s-dir", tail(row.directory || "", 46));
    dir.title = row.directory || "";
    const meta = el("div", "s-meta");
    const act = el("span", "s-activity", ago(row.last_event_at));
    act.title = row.last_event_at || "";
    const count = row.event_count ?? row.cursor_seq;
    meta.append(act, el("span", "s-count", count === undefined ? "" : count + (count === 1 ? " event" : " events")));
    li.append(top, dir, meta);
    li.onclick = () => { location.hash = "#/sessions/" + encodeURIComponent(row.session_id); };
    ul.appendChild(li);
  }
  $("session-count").textContent = (q ? shown.length + " of " : "") + rows.length + (rows.length === 1 ? " session" : " sessions");
  if (state.view) state.view.header();
}

// --- routing: /#/sessions/<id> (and ?session=<id>) -----------------------------------------------------

function routed() {
  const m = location.hash.match(/^#\/sessions\/(.+)$/);
  if (m) return decodeURIComponent(m[1]);
  return new URLSearchParams(location.search).get("session");
}

window.addEventListener("hashchange", () => {
  const sid = routed();
  if (sid && sid !== state.selected) select(sid);
});

function select(sid) {
  if (state.selected && state.selected !== sid && state.sock) state.sock.unsubscribe(state.selected);
  state.selected = sid;
  state.view = new SessionView(sid);
  state.model = new bridgeLib.SessionState(sid);
  if (state.sock) state.sock.subscribe(sid, null); // the whole history: the view starts empty
  if (controls()) controls().select(sid);
  for (const li of $("sessions").children) li.classList.toggle("selected", li.dataset.session === sid);
}

// --- one session: turns, steps, parts, tool cards, permissions, timeline --------------------------------

class SessionView {
  constructor(sid) {
    this.sid = sid;
    this.root = $("transcript");
    this.root.textContent = "";
    $("timeline").textContent = "";
    $("session-head").hidden = false;
    $("empty").hidden = true;
    this.turns = [];          // {el, seg, state, events, messageId, user}
    this.byMessage = new Map(); // prompt message id -> turn
    this.steps = new Map();   // assistant message id -> step
    this.parts = new Map();   // kind:asst/part -> {el, ended}
    this.tools = new Map();   // call id -> card
    this.perms = new Map();   // request id -> element
    this.head = null; this.complete = true; this.live = null;
    this.tokens = 0; this.cost = 0;
    this.header();
  }

  row() { return state.sessions.get(this.sid) || { session_id: this.sid, status: this.live }; }

  header() {
    const row = this.row();
    if (this.live) row.status = this.live.status;
    $("session-title").textContent = titleOf(row);
    $("session-id").textContent = this.sid;
    $("session-dir").textContent = row.directory || "";
    const b = $("session-status");
    b.className = "badge status-" + statusOf(row);
    b.textContent = statusLabel(row);
    const parts = ["status " + statusOf(row) + (row.status_reason ? " (" + row.status_reason + ")" : "")];
    if (this.head !== null) parts.push("head " + this.head);
    parts.push(this.turns.length + (this.turns.length === 1 ? " turn" : " turns"));
    if (this.tokens) parts.push(this.tokens.toLocaleString("en") + " tokens");
    if (this.tokens) parts.push("cost " + money(this.cost));
    if (!this.complete) parts.push("history incomplete");
    $("status").textContent = parts.join(" · ");
  }

  subscribed(m) {
    this.head = m.head;
    this.complete = m.complete;
    if (m.status) this.live = { status: m.status };
    if (m.title) this.row().title = m.title;
    this.header();
  }

  status(m) {
    this.live = { status: m.status };
    if (m.status !== "running") {
      for (const t of this.turns) if (t.state === "running") this.setTurn(t, m.status === "interrupted" ? "interrupted" : "done");
    }
    this.header();
  }

  // A turn starts with a prompt; events before any prompt (or deltas ahead of their events) join the last one.
  turn(messageId, text, delivery) {
    let t = messageId ? this.byMessage.get(messageId) : undefined;
    if (t) return t;
    if (!messageId && this.turns.length) return this.turns[this.turns.length - 1];
    const n = this.turns.length + 1;
    t = { n, el: el("section", "turn"), state: "queued", events: 0, messageId, user: null };
    t.el.dataset.turn = String(n);
    t.el.appendChild(el("div", "turn-label", "Turn " + n));
    if (text !== undefined) {
      t.user = el("div", "msg user queued", text);
      t.el.appendChild(t.user);
      if (delivery) t.user.title = "delivery: " + delivery;
    }
    t.seg = el("div", "tl-turn queued");
    t.seg.dataset.turn = String(n);
    t.seg.onclick = () => t.el.scrollIntoView({ behavior: "smooth", block: "start" });
    $("timeline").appendChild(t.seg);
    this.root.appendChild(t.el);
    this.turns.push(t);
    if (messageId) this.byMessage.set(messageId, t);
    return t;
  }

  current() { return this.turns.length ? this.turns[this.turns.length - 1] : this.turn(null, undefined); }

  setTurn(t, st) {
    t.state = st;
    t.seg.className = "tl-turn " + st;
    const steps = t.el.querySelectorAll(".step").length;
    t.seg.title = "Turn " + t.n + ": " + st + " · " + steps + (steps === 1 ? " step" : " steps") + " · " + t.events + " events";
  }

  step(asst) {
    let s = this.steps.get(asst);
    if (s) return s;
    const t = this.current();
    s = { el: el("div", "step"), turn: t };
    s.el.dataset.message = asst || "";
    s.headEl = el("div", "step-head", "assistant");
    s.el.appendChild(s.headEl);
    t.el.appendChild(s.el);
    this.steps.set(asst, s);
    return s;
  }

  part(kind, asst, partId) {
    const k = kind + ":" + asst + "/" + partId;
    let p = this.parts.get(k);
    if (p) return p;
    const s = this.step(asst);
    if (kind === "reasoning") {
      const d = el("details", "msg reasoning streaming");
      d.dataset.key = k;
      const sum = el("summary", null, "Reasoning…");
      const body = el("div", "body");
      d.append(sum, body);
      p = { el: d, body, sum, ended: false, kind };
    } else {
      const div = el("div", "msg text streaming");
      div.dataset.key = k;
      p = { el: div, body: div, ended: false, kind };
    }
    s.el.appendChild(p.el);
    this.parts.set(k, p);
    return p;
  }

  endPart(p, text) {
    p.body.textContent = text || "";
    p.ended = true;
    p.el.classList.remove("streaming");
    p.el.classList.add("ended");
    if (p.sum) p.sum.textContent = "Reasoning · " + (text || "").length + " characters";
  }

  tool(asst, callId, name) {
    let c = this.tools.get(callId);
    if (c) return c;
    const s = this.step(asst);
    c = { el: el("div", "tool-card preparing"), start: null };
    c.el.dataset.call = callId || "";
    const head = el("div", "tool-head");
    c.nameEl = el("span", "tool-name", name || "tool");
    c.statusEl = el("span", "badge tool-status preparing", "preparing");
    c.durEl = el("span", "tool-duration");
    head.append(c.nameEl, c.statusEl, c.durEl);
    const body = el("div", "tool-body");
    const inBox = el("div", "tool-in");
    inBox.appendChild(el("div", "label", "input"));
    c.inputEl = el("pre", "tool-input");
    inBox.appendChild(c.inputEl);
    const outBox = el("div", "tool-out");
    c.outLabel = el("div", "label", "output");
    c.outputEl = el("pre", "tool-output pending", "waiting for the tool…");
    outBox.append(c.outLabel, c.outputEl);
    body.append(inBox, outBox);
    c.el.append(head, body);
    s.el.appendChild(c.el);
    this.tools.set(callId, c);
    this.questionTool(c, name);
    for (const q of (this.questions || new Map()).values()) { // its question card came first: put it under
      if (callId && q.dataset.call === callId) s.el.insertBefore(q, c.el.nextSibling);
    }
    return c;
  }

  // The `question` tool's card: its question is shown once, as a question, by its question card
  // (questions.js), never again as the tool's input JSON.
  questionTool(c, name) {
    const asks = name === "question";
    c.el.classList.toggle("tool-question", asks);
    if (asks) c.inputEl.textContent = "";
  }

  toolState(c, st) {
    c.el.classList.remove("preparing", "running", "success", "failed");
    c.el.classList.add(st);
    c.statusEl.className = "badge tool-status " + st;
    c.statusEl.textContent = st;
  }

  event(m) {
    const f = m.fields || {};
    const d = m.data || {};
    const asst = f.assistant_message_id || "";
    if (this.head === null || m.seq > this.head) this.head = m.seq;
    const row = state.sessions.get(this.sid);
    if (row && f.timestamp_ms) row.last_event_at = new Date(f.timestamp_ms).toISOString();
    let t = null;
    switch (m.kind) {
      case "prompt:admitted":
        t = this.turn(f.message_id, (d.prompt && d.prompt.text) || f.text || "", f.delivery);
        break;
      case "prompt:started":
        t = this.turn(f.message_id, f.text || (d.prompt && d.prompt.text) || "");
        if (t.user) t.user.classList.remove("queued");
        this.setTurn(t, "running");
        break;
      case "step:start": {
        const s = this.step(asst);
        const model = [f.provider_id, f.model_id].filter(Boolean).join("/");
        s.headEl.textContent = [f.agent || "assistant", model].filter(Boolean).join(" · ");
        t = s.turn;
        if (t.user) t.user.classList.remove("queued"); // taken: a legacy turn has no prompt:started
        if (t.state === "queued") this.setTurn(t, "running");
        break;
      }
      case "text:start": this.part("text", asst, f.part_id || ""); break;
      case "reasoning:start": this.part("reasoning", asst, f.part_id || ""); break;
      case "text:end":
      case "reasoning:end":
        this.endPart(this.part(m.kind.split(":")[0], asst, f.part_id || ""), f.text);
        break;
      case "tool:input-start": this.tool(asst, f.call_id, f.tool_name); break;
      case "tool:input-end": {
        const c = this.tool(asst, f.call_id);
        if (!c.inputEl.textContent && !c.el.classList.contains("tool-question")) c.inputEl.textContent = pretty(f.text || "");
        break;
      }
      case "tool:start": {
        const c = this.tool(asst, f.call_id, f.tool_name);
        if (f.tool_name) c.nameEl.textContent = f.tool_name;
        c.inputEl.textContent = pretty(f.input ?? d.input ?? {}); // fields: either runtime (docs/websocket.md)
        this.questionTool(c, f.tool_name || c.nameEl.textContent);
        c.start = f.timestamp_ms ?? null;
        this.toolState(c, "running");
        break;
      }
      case "tool:success":
      case "tool:fail": {
        const c = this.tool(asst, f.call_id);
        if (f.child_session_id && !c.childEl) { // a task's subagent: its own session (docs/audit.md "The session tree")
          c.childEl = el("a", "tool-child", "subagent session " + f.child_session_id);
          c.childEl.href = "#/sessions/" + encodeURIComponent(f.child_session_id);
          c.el.appendChild(c.childEl);
        }
        const ok = m.kind === "tool:success";
        this.toolState(c, ok ? "success" : "failed");
        c.outLabel.textContent = ok ? "output" : "error";
        c.outputEl.className = ok ? "tool-output" : "tool-output tool-error";
        if (ok) c.outputEl.textContent = outputText(d) || f.output_text || "";
        else c.outputEl.textContent = (f.error_type ? f.error_type + ": " : "") + (f.error_message || "failed");
        if (typeof f.duration_ms === "number") c.durEl.textContent = duration(f.duration_ms);
        else if (c.start !== null && f.timestamp_ms) c.durEl.textContent = duration(f.timestamp_ms - c.start);
        break;
      }
      case "step:end": {
        const s = this.step(asst);
        const meta = el("div", "step-meta");
        if (f.finish) meta.appendChild(el("span", "finish", "finish " + f.finish));
        const tok = [["in", f.tokens_input], ["out", f.tokens_output], ["reasoning", f.tokens_reasoning],
          ["cache read", f.tokens_cache_read]].filter(([, v]) => v);
        if (tok.length) meta.appendChild(el("span", "tokens", "tokens " + tok.map(([k, v]) => k + " " + v).join(" · ")));
        if (typeof f.cost === "number") meta.appendChild(el("span", "cost", "cost " + money(f.cost)));
        s.el.appendChild(meta);
        this.tokens += (f.tokens_input || 0) + (f.tokens_output || 0) + (f.tokens_reasoning || 0);
        this.cost += f.cost || 0;
        t = s.turn;
        if (f.finish !== "tool-calls") this.setTurn(t, f.finish === "error" ? "error" : "done");
        break;
      }
      case "step:fail": {
        const s = this.step(asst);
        s.el.appendChild(el("div", "msg error", (f.error_type ? f.error_type + ": " : "") + (f.error_message || "step failed")));
        t = s.turn;
        this.setTurn(t, "error");
        break;
      }
      // The whole session as OpenCode shows it (docs/websocket.md 2.3.1): attachments, patches, undo, subagents.
      case "prompt:synthetic":
      case "file:attached": {
        t = this.turn(f.message_id || asst, undefined);
        const note = m.kind === "file:attached"
          ? el("div", "msg attachment", "attached: " + (f.filename || f.url || "file") + (f.mime ? " (" + f.mime + ")" : ""))
          : el("details", "msg synthetic");
        if (m.kind === "prompt:synthetic") note.append(el("summary", null, "added by opencode"), el("pre", null, f.text || ""));
        t.el.insertBefore(note, t.user ? t.user.nextSibling : t.el.firstChild.nextSibling);
        break;
      }
      case "patch":
        this.step(asst).el.appendChild(el("div", "meta patch", "files changed: " + (f.files || []).map((x) => x.split("/").pop()).join(", ")));
        break;
      case "message:removed": {
        const gone = this.byMessage.get(f.message_id) || (this.steps.get(f.message_id) || {}).turn;
        const s = this.steps.get(f.message_id);
        if (s) s.el.classList.add("removed");
        else if (gone) gone.el.classList.add("removed");
        break;
      }
      case "session:updated": {
        for (const x of this.root.querySelectorAll(".reverted-from")) x.classList.remove("reverted-from");
        const from = f.revert && this.byMessage.get(f.revert.message_id);
        if (from) from.el.classList.add("reverted-from");
        if (f.title) { this.row().title = f.title; }
        break;
      }
      case "agent:switch":
      case "model:switch":
        this.current().el.appendChild(el("div", "meta", m.kind === "agent:switch" ? "agent → " + (f.agent || "?")
          : "model → " + [f.provider_id, f.model_id].filter(Boolean).join("/")));
        break;
    }
    t = t || (asst && this.steps.get(asst) ? this.steps.get(asst).turn : this.turns[this.turns.length - 1]);
    if (t) { t.events += 1; this.setTurn(t, t.state); }
    this.header();
    this.follow();
  }

  delta(m) {
    if (m.kind !== "delta:text" && m.kind !== "delta:reasoning") return; // tool input is shown whole on tool:start
    const p = this.part(m.kind === "delta:text" ? "text" : "reasoning", m.assistant_message_id || "", m.part_id || "");
    if (!p.ended) p.body.textContent += m.delta;
    this.follow();
  }

  permission(m) {
    let box = this.perms.get(m.request_id);
    const c = m.call_id ? this.tools.get(m.call_id) : null;
    if (!box) {
      box = el("div", "msg permission");
      box.dataset.request = m.request_id;
      const host = c ? c.el.parentNode : (m.assistant_message_id && this.steps.get(m.assistant_message_id)
        ? this.steps.get(m.assistant_message_id).el : this.current().el);
      if (c) host.insertBefore(box, c.el.nextSibling); else host.appendChild(box);
      this.perms.set(m.request_id, box);
    }
    let what = ((m.action || (m.data && m.data.action) || "") + " " + (m.resources || (m.data && m.data.resources) || []).join(", ")).trim();
    if (what) box.dataset.what = what; else what = box.dataset.what || ""; // a reply names only the request
    const t = c ? this.turnOfCard(c) : this.current();
    if (m.state === "asked") {
      box.className = "msg permission pending";
      box.textContent = "Permission requested: " + what + " — waiting for an answer";
      if (!(controls() && controls().permissionButtons(box, this.sid, m.request_id))) box.append(" in opencode");
      if (c) { c.el.classList.add("asking"); c.outputEl.textContent = "waiting for permission…"; }
      if (t) this.setTurn(t, "waiting");
    } else {
      box.className = "msg permission replied";
      box.textContent = "Permission " + (m.reply || "answered") + ": " + what;
      if (c) c.el.classList.remove("asking");
      if (t && t.state === "waiting") this.setTurn(t, "running");
    }
    this.follow();
  }

  turnOfCard(c) {
    const sec = c.el.closest(".turn");
    return this.turns.find((t) => t.el === sec) || null;
  }

  follow() {
    const main = $("main");
    if (main.scrollHeight - main.scrollTop - main.clientHeight < 160) main.scrollTop = main.scrollHeight;
  }
}

// Relative times and retry countdowns move on their own.
setInterval(() => {
  for (const li of $("sessions").children) {
    const row = state.sessions.get(li.dataset.session);
    if (!row) continue;
    const act = li.querySelector(".s-activity");
    if (act) act.textContent = ago(row.last_event_at);
    const b = li.querySelector(".badge");
    if (b && statusOf(row) === "retrying") b.textContent = statusLabel(row);
  }
  if (state.view && statusOf(state.view.row()) === "retrying") state.view.header();
}, 1000);
// The list (statuses of sessions not subscribed to, counts, activity) is re-read while the page is seen.
setInterval(() => { if (!document.hidden) loadSessions(); }, 5000);

loadSessions();
connect();
if (routed()) select(routed());

// Removed messages are hidden by default; `?removed=1` (or Alt+Shift+R) shows them, greyed.
if (new URLSearchParams(location.search).get("removed") === "1") document.body.classList.add("show-removed");
window.addEventListener("keydown", (e) => {
  if (e.altKey && e.shiftKey && e.key.toLowerCase() === "r") document.body.classList.toggle("show-removed");
});
