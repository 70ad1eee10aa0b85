// The OpenAPI description for the docs pages: /openapi.json is behind the token like the API, so the
// docs fetch it with the token the web page keeps in this tab (or ask for it here).

import { token, setToken } from "./api.js";

export async function loadSpec() {
  for (;;) {
    const t = token();
    const response = await fetch("/openapi.json", { headers: t ? { Authorization: `Bearer ${t}` } : {} });
    if (response.ok) return response.json();
    if (response.status !== 401) throw new Error(`GET /openapi.json: ${response.status}`);
    setToken(await askToken());
  }
}

function askToken() {
  const box = document.getElementById("token-box");
  const form = document.getElementById("token-form");
  const input = document.getElementById("token-input");
  box.hidden = false;
  input.focus();
  return new Promise((resolve) => {
    form.addEventListener(
      "submit",
      (event) => {
        event.preventDefault();
        box.hidden = true;
        resolve(input.value.trim());
      },
      { once: true },
    );
  });
}

// "Try it out" requests from Swagger UI carry the token too.
export function withToken(request) {
  const t = token();
  if (t && !request.headers.Authorization) request.headers.Authorization = `Bearer ${t}`;
  return request;
}
