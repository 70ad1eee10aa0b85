// The web page: ask a question, follow the session live, stop it, answer its questions, read and
// export the report, list and delete past sessions. Plain ES modules, no build step.

import { api, ApiError, followSession, onTokenNeeded } from "./api.js";
import { clear, el, formatTime, percent, show } from "./dom.js";
import { renderReport, stopLabel } from "./report.js";

const $ = (id) => document.getElementById(id);
const PAGE_SIZE = 20;
const FINAL = new Set(["session_completed", "session_failed"]);
const FINISHED_STATUSES = new Set(["completed", "failed"]);

const state = {
  providers: [],
  sessionsOffset: 0,
  current: null, // { id, stream, seen: Set<seq>, sources, status }
};

// --- token --------------------------------------------------------------------------------------

let tokenPrompt = null;

function askToken(message) {
  if (tokenPrompt) return tokenPrompt; // several calls failing at once share one dialog
  const dialog = $("token-dialog");
  const input = $("token-input");
  $("token-error").textContent = message || "";
  show($("token-error"), Boolean(message));
  input.value = "";
  tokenPrompt = new Promise((resolve) => {
    const done = (value) => {
      dialog.removeEventListener("close", onClose);
      tokenPrompt = null;
      resolve(value);
    };
    const onClose = () => done(dialog.returnValue === "cancel" ? null : input.value.trim() || null);
    dialog.addEventListener("close", onClose);
    dialog.showModal();
    input.focus();
  });
  return tokenPrompt;
}

// --- small helpers ------------------------------------------------------------------------------

function banner(message) {
  $("banner").textContent = message || "";
  show($("banner"), Boolean(message));
}

function errorText(error) {
  return error instanceof ApiError ? error.message : `The server could not be reached (${error.message || error}).`;
}

function statusBadge(node, status) {
  node.textContent = String(status || "").replaceAll("_", " ");
  node.className = `badge status-${status}`;
}

function sessionUrl(id) {
  return id ? `/?session=${encodeURIComponent(id)}` : "/";
}

function navigate(id) {
  history.pushState({ session: id || null }, "", sessionUrl(id));
  route();
}

// --- providers and the question form ------------------------------------------------------------

function renderProviders() {
  const privacy = $("privacy").value;
  const box = clear($("provider-list"));
  for (const provider of state.providers) {
    const forbidden = privacy === "local_only" && provider.privacy !== "local";
    const usable = provider.available && !forbidden;
    const why = !provider.available ? provider.reason : forbidden ? "sends queries to the cloud" : "";
    const input = el("input", { type: "checkbox", name: "provider", value: provider.name, disabled: !usable });
    box.append(
      el("label", { class: `provider${usable ? "" : " unavailable"}`, title: why || `${provider.privacy} · ${provider.kind}` },
        input,
        el("span", {}, provider.name),
        provider.privacy === "local" ? el("span", { class: "tag" }, "local") : null,
        why ? el("span", { class: "muted small why" }, why) : null,
      ),
    );
  }
}

async function loadProviders() {
  try {
    state.providers = (await api.providers()).providers;
    renderProviders();
  } catch (error) {
    clear($("provider-list")).append(el("span", { class: "error" }, errorText(error)));
  }
}

function requestBody() {
  const body = { query: $("question").value.trim() };
  // no choice: the server's rule (only local folders with the offline engine: local only; else cloud allowed)
  if ($("privacy").value) body.privacy_mode = $("privacy").value;
  if ($("tier").value) body.tier = $("tier").value;
  if ($("domain").value) body.domain = $("domain").value;
  if ($("clarify").checked) body.clarify = true;
  if (!$("fetch").checked) body.fetch = false;
  const providers = [...document.querySelectorAll('input[name="provider"]:checked')].map((input) => input.value);
  if (providers.length) body.providers = providers;
  return body;
}

async function submitQuestion(event) {
  event.preventDefault();
  const body = requestBody();
  const error = $("ask-error");
  if (!body.query) {
    error.textContent = "Type a question first.";
    show(error);
    return;
  }
  show(error, false);
  $("start-button").disabled = true;
  try {
    const accepted = await api.start(body);
    navigate(accepted.session_id);
    loadSessions();
  } catch (failure) {
    error.textContent = errorText(failure);
    show(error);
  } finally {
    $("start-button").disabled = false;
  }
}

// --- past sessions ------------------------------------------------------------------------------

async function loadSessions(more = false) {
  state.sessionsOffset = more ? state.sessionsOffset + PAGE_SIZE : 0;
  let page;
  try {
    page = await api.sessions(PAGE_SIZE, state.sessionsOffset);
  } catch (error) {
    banner(errorText(error));
    return;
  }
  const list = $("session-list");
  if (!more) clear(list);
  $("sessions-title").textContent = sessionsTitle(page);
  for (const session of page.sessions) list.append(sessionItem(session, page.user !== null && page.all_users));
  show($("sessions-empty"), page.total === 0);
  show($("more-sessions"), state.sessionsOffset + page.sessions.length < page.total);
}

// Whose sessions the list shows: on a server with users (or a token), the key's user, or everyone's for an admin.
function sessionsTitle(page) {
  if (!page.user) return "Sessions";
  return page.all_users ? `Sessions of every user (you: ${page.user}, admin)` : `Sessions of ${page.user}`;
}

function sessionItem(session, showOwner = false) {
  const current = state.current && state.current.id === session.session_id;
  const open = el("a", { href: sessionUrl(session.session_id), class: "session-link" },
    el("span", { class: "session-query" }, session.query),
    el("span", { class: "session-meta" },
      el("span", { class: `badge status-${session.status}` }, session.status.replaceAll("_", " ")),
      el("span", { class: "muted small" }, formatTime(session.created_at)),
      ...(showOwner ? [el("span", { class: "muted small session-owner" }, session.owner || "local")] : []),
    ),
  );
  open.addEventListener("click", (event) => {
    event.preventDefault();
    navigate(session.session_id);
  });
  const remove = el("button", { type: "button", class: "ghost small delete", title: "Delete this session", "aria-label": "Delete" }, "Delete");
  remove.addEventListener("click", () => deleteSession(session));
  return el("li", { class: `session${current ? " current" : ""}`, dataset: { sessionId: session.session_id } }, open, remove);
}

async function deleteSession(session) {
  if (!confirm(`Delete this session and its report?\n\n${session.query}`)) return;
  try {
    await api.remove(session.session_id);
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 404)) {
      banner(errorText(error));
      return;
    }
  }
  if (state.current && state.current.id === session.session_id) navigate(null);
  loadSessions();
}

// --- one session, live --------------------------------------------------------------------------

function closeSession() {
  if (state.current && state.current.stream) state.current.stream.close();
  state.current = null;
}

function setStatus(status) {
  if (!state.current) return;
  state.current.status = status;
  statusBadge($("session-status"), status);
  $("stop-button").disabled = FINISHED_STATUSES.has(status) || status === "stopping";
  show($("stop-button"), !FINISHED_STATUSES.has(status));
  for (const item of document.querySelectorAll("#session-list li")) {
    if (item.dataset.sessionId === state.current.id) statusBadge(item.querySelector(".badge"), status);
  }
}

async function openSession(id) {
  closeSession();
  show($("ask-view"), false);
  show($("session-view"));
  show($("report"), false);
  show($("clarify-card"), false);
  clear($("report"));
  clear($("event-log"));
  clear($("live-sources"));
  clear($("saturation-rows"));
  show($("saturation-empty"));
  for (const id_ of ["session-phase", "session-message", "sources-count", "events-count"]) $(id_).textContent = "";
  $("session-cycle").textContent = "0";
  $("session-sources").textContent = "0";
  $("session-facts").textContent = "0";
  $("session-query").textContent = "";
  const current = { id, stream: null, seen: new Set(), sources: 0, status: null, reportShown: false };
  state.current = current;
  let status;
  try {
    status = await api.status(id);
  } catch (error) {
    banner(errorText(error));
    return;
  }
  if (state.current !== current) return;
  banner("");
  $("session-query").textContent = status.query;
  document.title = `${status.query.slice(0, 60)} · Research Tool`;
  setStatus(status.status);
  current.stream = followSession(id, {
    after: 0,
    onEvent: (event) => state.current === current && applyEvent(event),
    onConnection: (how) => {
      if (state.current === current) $("connection").textContent = how === "live" ? "● live" : how === "reconnecting" ? "reconnecting…" : "";
    },
    onEnd: (why) => state.current === current && streamEnded(why),
  });
  markCurrentInList();
}

function markCurrentInList() {
  for (const item of document.querySelectorAll("#session-list li")) {
    item.classList.toggle("current", Boolean(state.current) && item.dataset.sessionId === state.current.id);
  }
}

function logEvent(event) {
  const item = el("li", { class: `event type-${event.type}`, dataset: { seq: event.seq, type: event.type } },
    el("span", { class: "seq" }, `#${event.seq}`),
    el("time", { datetime: event.ts }, new Date(event.ts).toLocaleTimeString()),
    el("span", { class: "message" }, event.message),
  );
  $("event-log").append(item);
  $("events-count").textContent = `(${state.current.seen.size})`;
}

function applyEvent(event) {
  const current = state.current;
  if (current.seen.has(event.seq)) return;
  current.seen.add(event.seq);
  logEvent(event);
  const data = event.data || {};
  if (event.phase) $("session-phase").textContent = event.phase;
  if (typeof data.iteration === "number") $("session-cycle").textContent = String(data.iteration);
  if (event.type !== "source_found") $("session-message").textContent = event.message;
  switch (event.type) {
    case "session_started":
      if (current.status === "queued") setStatus("running");
      break;
    case "source_found":
      addSource(data);
      break;
    case "facts_verified":
      if (typeof data.facts === "number") $("session-facts").textContent = String(data.facts);
      break;
    case "saturation":
      addSaturation(data);
      break;
    case "clarification_requested":
      setStatus("awaiting_clarification");
      showQuestions(Array.isArray(data.questions) ? data.questions : []);
      break;
    case "clarification_received":
    case "clarification_timeout":
      show($("clarify-card"), false);
      if (current.status === "awaiting_clarification") setStatus("running");
      break;
    case "stop_requested":
      show($("clarify-card"), false);
      setStatus("stopping");
      break;
    case "session_completed":
      setStatus("completed");
      showReport();
      break;
    case "session_failed":
      setStatus("failed");
      banner(event.message);
      break;
    default:
      break;
  }
  if (FINAL.has(event.type)) loadSessions();
}

function addSource(data) {
  state.current.sources += 1;
  $("session-sources").textContent = String(state.current.sources);
  $("sources-count").textContent = `(${state.current.sources})`;
  const url = String(data.url || "");
  $("live-sources").append(
    el("li", {},
      el("span", { class: "source-title" }, data.title || url),
      el("span", { class: "muted small" }, ` · ${data.provider || ""}`),
    ),
  );
}

function meter(value) {
  const number = typeof value === "number" ? Math.max(0, Math.min(1, value)) : 0;
  return el("span", { class: "meter-cell" }, el("meter", { min: 0, max: 1, value: number }), el("span", {}, percent(value)));
}

function addSaturation(data) {
  show($("saturation-empty"), false);
  // the words of the report's header and the CLI (report.js STOP_LABELS)
  const decision = data.decision === "stop" ? `stop${data.stop_reason ? `: ${stopLabel(data.stop_reason)}` : ""}` : data.decision || "";
  $("saturation-rows").append(
    el("tr", { dataset: { cycle: data.iteration } },
      el("td", {}, String(data.iteration ?? "")),
      el("td", {}, meter(data.new_facts_ratio)),
      el("td", {}, meter(data.new_entities_ratio)),
      el("td", {}, meter(data.source_coverage)),
      el("td", {}, decision),
    ),
  );
  if (typeof data.total_facts === "number") $("session-facts").textContent = String(data.total_facts);
}

function showQuestions(questions) {
  const box = clear($("clarify-questions"));
  questions.forEach((question, index) => {
    const inputId = `answer-${index}`;
    box.append(
      el("div", { class: "question" },
        el("label", { for: inputId }, question),
        el("input", { id: inputId, type: "text", name: "answer", maxlength: 2000 }),
      ),
    );
  });
  show($("clarify-error"), false);
  show($("clarify-card"));
}

async function sendAnswers(event) {
  event.preventDefault();
  if (!state.current) return;
  const answers = [...document.querySelectorAll('#clarify-questions input[name="answer"]')]
    .map((input) => input.value.trim())
    .filter(Boolean);
  const error = $("clarify-error");
  if (!answers.length) {
    error.textContent = "Answer at least one question.";
    show(error);
    return;
  }
  $("clarify-button").disabled = true;
  try {
    await api.clarify(state.current.id, answers);
    show($("clarify-card"), false);
  } catch (failure) {
    error.textContent = errorText(failure);
    show(error);
  } finally {
    $("clarify-button").disabled = false;
  }
}

async function stopSession() {
  if (!state.current) return;
  $("stop-button").disabled = true;
  try {
    const accepted = await api.stop(state.current.id);
    setStatus(accepted.status);
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 409)) banner(errorText(error));
  }
}

async function showReport() {
  const current = state.current;
  if (!current || current.reportShown) return;
  current.reportShown = true;
  try {
    const report = await api.report(current.id);
    if (state.current !== current) return;
    renderReport($("report"), report, { onExport: (format) => exportReport(current.id, format) });
    show($("report"));
  } catch (error) {
    current.reportShown = false;
    banner(errorText(error));
  }
}

async function streamEnded(why) {
  const current = state.current;
  if (why === "gone") {
    banner("This session no longer exists.");
    return;
  }
  try {
    const status = await api.status(current.id);
    setStatus(status.status);
    if (status.status === "completed") showReport();
  } catch (error) {
    banner(errorText(error));
  }
}

async function exportReport(id, format) {
  try {
    const blob = await api.reportBlob(id, format);
    const url = URL.createObjectURL(blob);
    const link = el("a", { href: url, download: `research-${id}.${format}` });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  } catch (error) {
    banner(errorText(error));
  }
}

// --- routing ------------------------------------------------------------------------------------

let routed = null; // the location.search last routed: following a #source-n link must not reopen the session

function route() {
  if (routed === location.search) return;
  routed = location.search;
  const id = new URLSearchParams(location.search).get("session");
  banner("");
  if (id) {
    openSession(id);
  } else {
    closeSession();
    document.title = "Research Tool";
    show($("session-view"), false);
    show($("ask-view"));
    markCurrentInList();
    $("question").focus();
  }
}

function start() {
  onTokenNeeded(askToken);
  $("ask-form").addEventListener("submit", submitQuestion);
  $("clarify-form").addEventListener("submit", sendAnswers);
  $("stop-button").addEventListener("click", stopSession);
  $("privacy").addEventListener("change", renderProviders);
  $("refresh-sessions").addEventListener("click", () => loadSessions());
  $("more-sessions").addEventListener("click", () => loadSessions(true));
  for (const link of [$("home-link"), $("new-link")]) {
    link.addEventListener("click", (event) => {
      event.preventDefault();
      navigate(null);
    });
  }
  window.addEventListener("popstate", route);
  route();
  loadProviders();
  loadSessions();
}

start();
