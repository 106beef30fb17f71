"use strict";
// Questions of the agent (docs/websocket.md, "Questions"): a card under the `question` tool call with its
// options (radio buttons for a single choice, check boxes for a multiple one, a text box where free text
// is allowed), Answer and Reject buttons for tokens that may answer (scope `prompt`, over the WebSocket
// `command` op), and the outcome once settled. Text goes into the page with textContent only.

const questionCards = (() => {
  function optionRow(name, multiple, option) {
    const label = el("label", "q-option");
    const input = el("input");
    input.type = multiple ? "checkbox" : "radio";
    input.name = name;
    input.value = option.label;
    label.append(input, " ", el("span", "q-label", option.label));
    if (option.description) label.append(" ", el("span", "q-desc", "— " + option.description));
    return label;
  }

  // The answers the form holds, one list per question; null (and a message) when one is missing.
  function collect(form, questions) {
    const answers = [];
    questions.forEach((q, i) => {
      const chosen = [...form.querySelectorAll(`input[name="q${i}"]:checked`)].map((x) => x.value);
      const other = form.querySelector(`input[name="q${i}-other"]`);
      if (other && other.value.trim()) chosen.push({ text: other.value.trim() });
      answers.push(q.multiple ? chosen : chosen.slice(-1));
    });
    return answers.every((a) => a.length > 0) ? answers : null;
  }

  function askedCard(card, view, m) {
    card.className = "msg question pending";
    card.append(el("div", "q-title", "The agent asks:"));
    const form = el("form", "q-form");
    (card.questions || []).forEach((q, i) => {
      const box = el("fieldset", "q-question");
      box.append(el("legend", "q-header", q.header || "Question " + (i + 1)), el("div", "q-text", q.question || ""));
      for (const o of q.options || []) box.appendChild(optionRow("q" + i, q.multiple, o));
      if (q.custom !== false) {
        const other = el("input", "q-other");
        other.name = "q" + i + "-other";
        other.placeholder = "or type your own answer";
        box.appendChild(other);
      }
      form.appendChild(box);
    });
    form.addEventListener("submit", (e) => e.preventDefault());
    card.appendChild(form);
    const answer = () => collect(form, card.questions || []);
    if (!(controls() && controls().questionButtons(card, view.sid, m.request_id, answer))) {
      card.append(el("div", "q-note", "answer it in opencode (this token may not answer)"));
    }
  }

  function settledCard(card, m) {
    card.className = "msg question " + m.state;
    const qs = card.questions || [];
    if (m.state === "answered") {
      card.append(el("div", "q-title", "Question answered" + (m.answered_by ? " by " + m.answered_by : "")));
      (m.answers || []).forEach((a, i) => {
        const head = qs[i] ? (qs[i].header || qs[i].question) + ": " : "";
        card.append(el("div", "q-answer", head + a.join(", ")));
      });
    } else if (m.state === "rejected") {
      card.append(el("div", "q-title", "Question rejected" + (m.answered_by ? " by " + m.answered_by : "")
        + ": the turn stopped"));
    } else {
      card.append(el("div", "q-title", "Question settled while the bridge was away (answer unknown)"));
    }
    for (const q of qs) card.append(el("div", "q-text q-asked", q.question || ""));
  }

  return {
    // A `question` frame for the session on screen.
    show(view, m) {
      view.questions = view.questions || new Map();
      let card = view.questions.get(m.request_id);
      const c = m.call_id ? view.tools.get(m.call_id) : null;
      if (!card) {
        card = el("div", "msg question");
        card.dataset.request = m.request_id;
        if (m.call_id) card.dataset.call = m.call_id; // moved under its tool card when that comes (viewer.js)
        const host = c ? c.el.parentNode : view.current().el;
        if (c) host.insertBefore(card, c.el.nextSibling); else host.appendChild(card);
        view.questions.set(m.request_id, card);
      }
      if (Array.isArray(m.questions)) card.questions = m.questions;
      if (m.state === "asked" && card.dataset.state && card.dataset.state !== "asked") return; // settled stays
      card.dataset.state = m.state;
      card.textContent = "";
      const t = c ? view.turnOfCard(c) : view.current();
      if (m.state === "asked") {
        askedCard(card, view, m);
        if (c) { c.el.classList.add("asking"); c.outputEl.textContent = "waiting for an answer…"; }
        if (t) view.setTurn(t, "waiting");
        card.scrollIntoView({ block: "nearest" }); // in sight above the composer (viewer.css scroll-padding)
      } else {
        settledCard(card, m);
        if (c) c.el.classList.remove("asking");
        if (t && t.state === "waiting") view.setTurn(t, "running");
      }
      view.follow();
    },
  };
})();
