// Agent Chat UI's stop, with its own hook: useStream from @langchain/langgraph-sdk (unmodified, rendered in Node by
// react-test-renderer) submits a slow question, calls stream.stop() once the progress line shows (the SDK drops
// the stream; the run was created with on_disconnect "cancel"), then asks the next question at once.
// Usage: node use_stream_stop.mjs <server url> <api key>; RESEARCH_OPTIONS is the runs' context (JSON).
// Prints one JSON object; tests/api/test_langgraph_js.py checks it.
import React from "react";
import TestRenderer from "react-test-renderer";
import { Client } from "@langchain/langgraph-sdk";
import { useStream } from "@langchain/langgraph-sdk/react";

globalThis.IS_REACT_ACT_ENVIRONMENT = false;
const [apiUrl, apiKey] = process.argv.slice(2);
const context = JSON.parse(process.env.RESEARCH_OPTIONS);
const SLOW = "How do I run a subprocess with a timeout and capture its output?";
const NEXT = "How do I read a JSON file?";
const WAIT_MS = 90_000;

const text = (c) => (typeof c === "string" ? c : Array.isArray(c) ? c.map((b) => b?.text ?? "").join(" ") : "");
let stream = null;
let tid = null;
const renders = [];
const waiters = [];
function Probe() {
  const [threadId, setThreadId] = React.useState(null);
  tid = threadId;
  stream = useStream({ apiUrl, apiKey, assistantId: "research", threadId, onThreadId: setThreadId });
  const snapshot = {
    isLoading: stream.isLoading,
    messages: stream.messages.map((m) => ({ type: m.type, content: text(m.content) })),
    error: stream.error ? String(stream.error?.message ?? stream.error) : null,
  };
  renders.push(snapshot);
  queueMicrotask(() => {
    for (const w of [...waiters]) if (w.match(snapshot)) { waiters.splice(waiters.indexOf(w), 1); w.resolve(snapshot); }
  });
  return null;
}
function waitFor(label, match) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out waiting for: ${label}; last: ${JSON.stringify(renders.at(-1))}`)), WAIT_MS);
    waiters.push({ match, resolve: (r) => { clearTimeout(timer); resolve(r); } });
  });
}
const renderer = TestRenderer.create(React.createElement(Probe));
const result = {};

while (stream === null) await new Promise((resolve) => setTimeout(resolve, 10)); // the first render
stream.submit({ messages: [{ type: "human", content: SLOW }] }, { streamMode: ["values"], context });
await waitFor("the progress line", (r) => r.isLoading && (r.messages.at(-1)?.content ?? "").startsWith("Researching"));
await stream.stop();
result.stopped = renders.at(-1);
stream.submit({ messages: [{ type: "human", content: NEXT }] }, { streamMode: ["values"], context: { ...context, tier: "simple" } });
const done = await waitFor("the next answer", (r) => !r.isLoading && (r.messages.at(-1)?.content ?? "").includes("Sources:"));
result.next = done;
result.errors = renders.map((r) => r.error).filter(Boolean);
const client = new Client({ apiUrl, apiKey });
result.runs = (await client.runs.list(tid)).map((r) => ({ status: r.status, created_at: r.created_at }));
renderer.unmount();
process.stdout.write(JSON.stringify(result));
process.exit(0);
