// Talking to the server: the token (asked once, kept in this tab's sessionStorage), JSON calls that
// carry it, and the live event stream over the WebSocket.

const TOKEN_KEY = "research-tool.token";
const WS_SUBPROTOCOL = "research-tool";

export class ApiError extends Error {
  constructor(status, type, message) {
    super(message);
    this.status = status;
    this.type = type;
  }
}

let askForToken = async () => null; // installed by the page: shows the token dialog, resolves with a token

export function onTokenNeeded(handler) {
  askForToken = handler;
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

function headers(extra = {}) {
  const h = { ...extra };
  const t = token();
  if (t) h.Authorization = `Bearer ${t}`;
  return h;
}

async function errorOf(response) {
  try {
    const body = await response.json();
    if (body && body.error) return new ApiError(response.status, body.error.type, body.error.message);
  } catch {
    /* not JSON */
  }
  return new ApiError(response.status, "error", `${response.status} ${response.statusText}`);
}

// One request; a 401 asks for the token (once per wrong token) and tries again.
export async function request(method, path, { body, accept } = {}) {
  for (;;) {
    const init = { method, headers: headers(accept ? { Accept: accept } : {}) };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers["Content-Type"] = "application/json";
    }
    const response = await fetch(path, init);
    if (response.status === 401) {
      const hadToken = token() !== null;
      const given = await askForToken(hadToken ? "That token was not accepted." : "");
      if (!given) throw await errorOf(response);
      setToken(given);
      continue;
    }
    if (!response.ok) throw await errorOf(response);
    return response;
  }
}

export async function getJson(path) {
  return (await request("GET", path)).json();
}

export async function postJson(path, body) {
  return (await request("POST", path, { body })).json();
}

export const api = {
  providers: () => getJson("/api/providers"),
  sessions: (limit, offset) => getJson(`/api/research?limit=${limit}&offset=${offset}`),
  start: (body) => postJson("/api/research/start", body),
  status: (id) => getJson(`/api/research/${encodeURIComponent(id)}/status`),
  stop: (id) => postJson(`/api/research/${encodeURIComponent(id)}/stop`),
  clarify: (id, answers) => postJson(`/api/research/${encodeURIComponent(id)}/clarify`, { answers }),
  report: (id) => getJson(`/api/research/${encodeURIComponent(id)}/report?format=json`),
  reportBlob: async (id, format) =>
    (await request("GET", `/api/research/${encodeURIComponent(id)}/report?format=${format}`)).blob(),
  remove: (id) => request("DELETE", `/api/research/${encodeURIComponent(id)}`),
};

function base64url(text) {
  const bytes = new TextEncoder().encode(text);
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

// A browser cannot set headers on a WebSocket: the token travels as a subprotocol (api/auth.py).
function wsProtocols() {
  const t = token();
  return t ? [WS_SUBPROTOCOL, `bearer.${base64url(t)}`] : [WS_SUBPROTOCOL];
}

const RETRY_DELAYS_MS = [250, 500, 1000, 2000, 4000];

// Follow a session's events: each event with seq > after exactly once, in order. A dropped connection
// reconnects with after=<last seq seen>, so nothing is missed or repeated. Returns { close() }.
export function followSession(id, { after = 0, onEvent, onEnd, onConnection }) {
  let last = after;
  let socket = null;
  let closed = false;
  let failures = 0;
  let timer = null;

  const end = (why) => {
    if (closed) return;
    closed = true;
    onConnection?.("closed");
    onEnd?.(why);
  };

  const reconnect = () => {
    if (closed) return;
    const delay = RETRY_DELAYS_MS[Math.min(failures, RETRY_DELAYS_MS.length - 1)];
    failures += 1;
    onConnection?.("reconnecting");
    timer = setTimeout(async () => {
      try {
        await api.status(id); // asks for the token on a 401; a 404 means the session is gone
      } catch (error) {
        if (error instanceof ApiError && (error.status === 404 || error.status === 401)) {
          end(error.status === 404 ? "gone" : "unauthorized");
          return;
        }
      }
      connect();
    }, delay);
  };

  const connect = () => {
    if (closed) return;
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const url = `${scheme}//${location.host}/api/research/${encodeURIComponent(id)}/ws?after=${last}`;
    let finished = false;
    socket = new WebSocket(url, wsProtocols());
    socket.onopen = () => {
      failures = 0;
      onConnection?.("live");
    };
    socket.onmessage = (message) => {
      let event;
      try {
        event = JSON.parse(message.data);
      } catch {
        return;
      }
      if (typeof event.seq !== "number" || event.seq <= last) return; // already seen
      if (event.seq !== last + 1) {
        socket.close(); // a gap: reconnect from the last event seen
        return;
      }
      last = event.seq;
      if (event.type === "session_completed" || event.type === "session_failed") finished = true;
      onEvent(event);
    };
    socket.onclose = (close) => {
      socket = null;
      if (closed) return;
      if (finished) end("finished");
      else if (close.code === 4404) end("gone");
      else if (close.code === 1000) end("finished");
      else reconnect();
    };
  };

  connect();
  return {
    get lastSeq() {
      return last;
    },
    close() {
      closed = true;
      clearTimeout(timer);
      if (socket) socket.close(1000);
    },
  };
}
