// useStream, the React hook of @langchain/langgraph-sdk that Agent Chat UI is built on, unmodified, rendered in
// Node by react-test-renderer against a live research-tool server, used the way Agent Chat UI uses it
// (fetchStateHistory, stream.messages, stream.interrupt, submit with chat messages, regenerate from the
// message's parent checkpoint). Usage: node use_stream.mjs <server url> <api key>; RESEARCH_OPTIONS is the runs'
// context (JSON). Prints one JSON object with what the hook showed; tests/api/test_langgraph_js.py checks it.
import React from "react";
import TestRenderer from "react-test-renderer";
import { useStream } from "@langchain/langgraph-sdk/react";

globalThis.IS_REACT_ACT_ENVIRONMENT = false;
const [apiUrl, apiKey] = process.argv.slice(2);
const context = JSON.parse(process.env.RESEARCH_OPTIONS);
const QUESTION = process.env.RESEARCH_QUESTION;
const AMBIGUOUS = "Python";
const ANSWER = "the programming language";
const WAIT_MS = 90_000;

function text(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((b) => (typeof b === "string" ? b : b?.text ?? "")).join(" ");
  return "";
}

// One mounted hook: every render is kept as a snapshot; waitFor resolves at the first render that matches.
function mount(assistantId, threadId = null) {
  const renders = [];
  const waiters = [];
  let stream = null;
  function Probe() {
    const [tid, setTid] = React.useState(threadId);
    stream = useStream({ apiUrl, apiKey, assistantId, threadId: tid, fetchStateHistory: true, onThreadId: setTid });
    const snapshot = {
      threadId: tid,
      isLoading: stream.isLoading,
      messages: stream.messages.map((m) => ({ type: m.type, id: m.id, content: text(m.content) })),
      interrupt: stream.interrupt ?? null,
      values: stream.values ?? null,
      error: stream.error ? String(stream.error?.message ?? stream.error) : null,
    };
    renders.push(snapshot);
    queueMicrotask(() => {
      for (const waiter of [...waiters]) {
        if (waiter.match(snapshot)) {
          waiters.splice(waiters.indexOf(waiter), 1);
          waiter.resolve(snapshot);
        }
      }
    });
    return null;
  }
  const renderer = TestRenderer.create(React.createElement(Probe));
  return {
    renders,
    get stream() {
      return stream;
    },
    last: () => renders[renders.length - 1],
    waitFor(label, match) {
      const now = renders.find((r, i) => i >= this.since && match(r));
      if (now) return Promise.resolve(now);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`timed out waiting for: ${label}; last render: ${JSON.stringify(this.last())}`)), WAIT_MS);
        waiters.push({ match, resolve: (r) => { clearTimeout(timer); resolve(r); } });
      });
    },
    since: 0,
    mark() {
      this.since = renders.length;
    },
    unmount: () => renderer.unmount(),
  };
}

const lastAi = (r) => [...r.messages].reverse().find((m) => m.type === "ai");
const answered = (r) => !r.isLoading && r.messages.length >= 2 && (lastAi(r)?.content ?? "").includes("Sources:");

async function run(hook, label, submit) {
  hook.mark();
  const start = hook.renders.length;
  await submit();
  await hook.waitFor(`${label}: loading`, (r) => r.isLoading);
  const done = await hook.waitFor(`${label}: answer`, answered);
  return { during: hook.renders.slice(start).filter((r) => r.isLoading), done };
}

const result = {};

// 1. Ask: the question stays on screen, a progress line shows during the run, then the cited answer.
const chat = mount("research");
await chat.waitFor("thread list loaded", (r) => !r.isLoading);
const asked = await run(chat, "ask", () =>
  chat.stream.submit(
    { messages: [{ type: "human", content: QUESTION }] },
    { streamMode: ["values"], context, streamResumable: true },
  ),
);
result.askDuring = asked.during.map((r) => r.messages);
result.askDone = asked.done.messages;
result.askThread = asked.done.threadId;
result.askValues = asked.done.values;

// 2. Regenerate, as Agent Chat UI does it: no input, the answer's parent checkpoint.
const answer = chat.stream.messages.findLast((m) => m.type === "ai");
const parent = chat.stream.getMessagesMetadata(answer)?.firstSeenState?.parent_checkpoint ?? null;
result.regenerateCheckpoint = parent;
const regenerated = await run(chat, "regenerate", () =>
  chat.stream.submit(undefined, { checkpoint: parent, streamMode: ["values"] }),
);
result.regenerateDuring = regenerated.during.map((r) => r.messages);
result.regenerateDone = regenerated.done.messages;
result.regenerateThread = regenerated.done.threadId;
chat.unmount();

// 3. Clarify: the research-clarify assistant asks which meaning; the interrupt is read with its questions.
const ask = mount("research-clarify");
await ask.waitFor("thread list loaded", (r) => !r.isLoading);
ask.mark();
await ask.stream.submit({ messages: [{ type: "human", content: AMBIGUOUS }] }, { streamMode: ["values"], context });
const paused = await ask.waitFor("the clarifying interrupt", (r) => !r.isLoading && r.interrupt?.value?.questions?.length > 0);
result.interruptLive = paused.interrupt;
result.interruptMessages = paused.messages;
const clarifyThread = paused.threadId;
ask.unmount();

// 4. A reload of that thread reads the interrupt from its history; a chat reply answers it.
const reloaded = mount("research-clarify", clarifyThread);
const read = await reloaded.waitFor("the interrupt after a reload", (r) => !r.isLoading && r.interrupt?.value?.questions?.length > 0);
result.interruptReloaded = read.interrupt;
const replied = await run(reloaded, "reply", () =>
  reloaded.stream.submit(
    { messages: [...reloaded.stream.messages, { type: "human", content: ANSWER }] },
    { streamMode: ["values"], context },
  ),
);
result.replyDone = replied.done.messages;
result.replyValues = replied.done.values;
result.replyInterrupt = replied.done.interrupt;
result.clarifyThread = clarifyThread;
reloaded.unmount();

process.stdout.write(JSON.stringify(result));
process.exit(0);
