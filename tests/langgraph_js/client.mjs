// The official JS client (@langchain/langgraph-sdk), unmodified, against a live research-tool server.
// Usage: node client.mjs <server url> <api key>; the run's input comes as JSON in RESEARCH_INPUT.
// Prints one JSON object with what each call returned; tests/api/test_langgraph_js.py checks it.
import { Client } from "@langchain/langgraph-sdk";

const [apiUrl, apiKey] = process.argv.slice(2);
const input = JSON.parse(process.env.RESEARCH_INPUT);
const client = new Client({ apiUrl, apiKey });

const streamed = await client.threads.create({ metadata: { client: "js" } });
const parts = [];
for await (const part of client.runs.stream(streamed.thread_id, "research", {
  input,
  streamMode: ["values", "updates", "custom"],
})) {
  parts.push({ event: part.event, id: part.id ?? null, data: part.data });
}

const cancelled = await client.threads.create({ metadata: { client: "js" } });
const run = await client.runs.create(cancelled.thread_id, "research", { input });
await client.runs.cancel(cancelled.thread_id, run.run_id, true, "interrupt");
const joined = await client.runs.join(cancelled.thread_id, run.run_id);
const cancelledRun = await client.runs.get(cancelled.thread_id, run.run_id);

const found = await client.threads.search({ metadata: { client: "js" }, limit: 10 });
let missing = null;
try {
  await client.threads.get("0123456789abcdef0123456789abcdef");
} catch (error) {
  missing = String(error?.status ?? error?.message ?? error);
}

process.stdout.write(
  JSON.stringify({
    streamedThread: streamed.thread_id,
    parts,
    cancelledThread: cancelled.thread_id,
    joined,
    cancelledRun,
    found: found.map((t) => t.thread_id),
    missing,
  }),
);
