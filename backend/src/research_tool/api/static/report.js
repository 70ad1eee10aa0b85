// The finished report: the short answer first (when the report has one), the answer with its [n]
// citations as links into the source list, findings with verified / contradicted marks, the sources,
// the gaps, and export buttons. Every string from the report is inserted as text.

import { el, externalLink, formatTime, percent, plural } from "./dom.js";
import { inlineMarkdown } from "./markdown.js";

const CITATION = /\[(\d+)\]/g;
// Why a session stopped, in the words of the CLI and the md/html header (models/stop_reasons.py; a test keeps
// the two tables equal).
export const STOP_LABELS = {
  sufficient: "the question's required information was found",
  fact_saturation: "saturated: the last cycle added almost no new facts",
  entity_saturation: "saturated: the last cycle added almost no new entities",
  source_coverage: "saturated: no unexplored query was left",
  citation_circularity: "saturated: searches kept returning sources already read",
  max_iterations: "the tier's research cycles were all run",
  max_execution_time: "the time limit was reached",
  provider_call_budget: "the provider-call budget was spent",
  token_budget: "the token budget was spent",
  user_requested: "stopped at the user's request",
  all_providers_failed: "every search provider failed",
};

export function stopLabel(reason) {
  return STOP_LABELS[reason] || String(reason).replaceAll("_", " ");
}
export const EXPORT_FORMATS = ["md", "json", "html", "bib"];

// Text with [n] markers turned into links to #source-n (only for sources the report lists).
function withCitations(text, known) {
  const parts = [];
  let at = 0;
  for (const match of String(text).matchAll(CITATION)) {
    parts.push(text.slice(at, match.index));
    const id = `[${match[1]}]`;
    if (known.has(id)) {
      parts.push(el("a", { href: `#source-${match[1]}`, class: "cite", title: known.get(id) }, id));
    } else {
      parts.push(id);
    }
    at = match.index + match[0].length;
  }
  parts.push(text.slice(at));
  return parts;
}

// A line of the answer or a finding: its emphasis and code spans rendered, its [n] markers linked.
function rich(text, known) {
  return inlineMarkdown(text, (plain) => withCitations(plain, known));
}

// The answer is markdown of the simplest kind: paragraphs, "- " bullets, `code`, *emphasis* and _notes_.
function answerBlocks(markdown, known) {
  const blocks = [];
  for (const paragraph of String(markdown).split(/\n\s*\n/)) {
    const lines = paragraph.split("\n").filter((line) => line.trim());
    if (!lines.length) continue;
    if (lines.every((line) => /^\s*[-*] /.test(line))) {
      blocks.push(el("ul", {}, lines.map((line) => el("li", {}, rich(line.replace(/^\s*[-*] /, ""), known)))));
      continue;
    }
    const text = lines.join(" ");
    const heading = /^(#{1,6})\s+(.*)$/.exec(text);
    if (heading) {
      blocks.push(el("h3", {}, rich(heading[2], known)));
    } else {
      const note = /^_[^_].*_$/.test(text); // a whole paragraph in emphasis: the engine's own note
      blocks.push(el("p", { class: note ? "note" : null }, rich(text, known)));
    }
  }
  return blocks;
}

function findingMark(finding) {
  if (finding.contradictions && finding.contradictions.length) {
    return el("span", { class: "mark contradicted", title: "another source disagrees" }, "⚠ contradicted");
  }
  if (finding.verified) {
    return el("span", { class: "mark verified", title: "supported by independent sources" }, "✓ verified");
  }
  return el("span", { class: "mark unverified", title: "one source" }, "single source");
}

function contradictionText(item) {
  if (typeof item === "string") return item;
  if (item && typeof item === "object") return item.statement || item.text || item.claim || JSON.stringify(item);
  return String(item);
}

function sourceItem(citation) {
  const number = String(citation.id).replace(/[[\]]/g, "");
  const details = [
    citation.provider,
    citation.type !== citation.provider ? citation.type : null,
    (citation.authors || []).slice(0, 3).join(", "),
    citation.year,
    citation.doi ? `doi:${citation.doi}` : null,
  ].filter((part) => part !== null && part !== undefined && part !== "");
  return el(
    "li",
    { id: `source-${number}`, class: "source" },
    el("span", { class: "source-id" }, citation.id),
    el("div", {},
      el("div", { class: "source-title" }, externalLink(citation.url, citation.title || citation.url || citation.location)),
      el("div", { class: "muted small" }, details.join(" · ")),
      citation.location && citation.location !== citation.title
        ? el("div", { class: "muted small location" }, citation.location)
        : null,
    ),
  );
}

export function renderReport(container, report, { onExport }) {
  const citations = Array.isArray(report.citations) ? report.citations : [];
  const known = new Map(citations.map((c) => [c.id, c.title || c.url || c.id]));
  const findings = Array.isArray(report.findings) ? report.findings : [];
  const metadata = report.metadata || {};

  const parts = [el("h2", {}, "Answer")];
  if (typeof report.short_answer === "string" && report.short_answer.trim()) {
    parts.push(el("p", { class: "short-answer", id: "short-answer" }, withCitations(report.short_answer, known)));
  }
  if (report.answered === false) {
    parts.push(el("p", { class: "not-answered" }, "The sources found do not answer the question directly; below is what they say."));
  }
  parts.push(el("div", { class: "answer", id: "answer" }, answerBlocks(report.answer || "", known)));
  if (report.stop_reason) {
    parts.push(el("p", { class: "muted small", id: "stopped" }, `${report.status || "completed"}: ${stopLabel(report.stop_reason)}`));
  }
  // which providers failed and why, once (text only: it quotes provider error messages' types, never markup)
  // When other providers answered (offline: the local folders), the failed ones are a plain, muted line, as
  // the answer's own note says it; when nothing answered, a warning.
  if (metadata.degraded_mode && metadata.degraded_reason) {
    const failed = new Set((metadata.provider_failures || []).filter((f) => f.failed === f.calls).map((f) => f.provider));
    const answered = citations.some((c) => c.provider && !failed.has(c.provider));
    parts.push(answered
      ? el("p", { class: "muted small", id: "degraded" }, `Searches that failed: ${String(metadata.degraded_reason)}`)
      : el("p", { class: "small degraded", id: "degraded" }, `Degraded: ${String(metadata.degraded_reason)}`));
  }
  // what the engine noticed about its model (a model without a chat template), one sentence each
  for (const note of Array.isArray(metadata.model_notes) ? metadata.model_notes : []) {
    parts.push(el("p", { class: "small degraded model-note" }, `Model: ${String(note)}`));
  }

  parts.push(
    el("div", { class: "exports" },
      el("span", { class: "muted" }, "Export"),
      EXPORT_FORMATS.map((format) =>
        el("button", { type: "button", class: "ghost small", "data-format": format, onclick: () => onExport(format) }, format),
      ),
    ),
  );

  // Findings that do not bear on the question (bears_on_question false) carry no mark: "Also in the sources".
  const onQuestion = findings.filter((finding) => finding.bears_on_question !== false);
  const alsoInSources = findings.filter((finding) => finding.bears_on_question === false);
  if (onQuestion.length) {
    parts.push(el("h2", {}, `Findings (${onQuestion.length})`));
    parts.push(
      el("ul", { class: "findings", id: "findings" },
        onQuestion.map((finding) =>
          el("li", { class: "finding" },
            findingMark(finding),
            el("span", { class: "statement" }, rich(finding.statement || "", known)),
            typeof finding.confidence === "number"
              ? el("span", { class: "muted small confidence" }, `confidence ${percent(finding.confidence)}`)
              : null,
            finding.contradictions && finding.contradictions.length
              ? el("ul", { class: "contradictions" }, finding.contradictions.map((c) => el("li", {}, contradictionText(c))))
              : null,
          ),
        ),
      ),
    );
  }
  if (alsoInSources.length) {
    parts.push(el("h2", {}, "Also in the sources"));
    parts.push(
      el("ul", { class: "findings also", id: "also-in-sources" },
        alsoInSources.map((finding) =>
          el("li", { class: "finding" }, el("span", { class: "statement" }, rich(finding.statement || "", known))),
        ),
      ),
    );
  }

  parts.push(el("h2", {}, `Sources (${citations.length})`));
  parts.push(el("ol", { class: "sources", id: "sources" }, citations.map(sourceItem)));

  if (Array.isArray(report.gaps) && report.gaps.length) {
    parts.push(el("h2", {}, "Gaps"));
    parts.push(el("ul", { class: "gaps" }, report.gaps.map((gap) => el("li", {}, String(gap)))));
  }

  const facts = [
    report.privacy_mode ? `privacy ${String(report.privacy_mode).replaceAll("_", " ")}` : null,
    metadata.engine ? `engine ${metadata.engine}` : null,
    metadata.model ? `model ${metadata.model}` : null,
    typeof metadata.iterations === "number" ? plural(metadata.iterations, "cycle") : null,
    typeof metadata.duration_s === "number" ? `${metadata.duration_s.toFixed(1)} s` : null,
    metadata.timestamp ? formatTime(metadata.timestamp) : null,
    metadata.degraded_mode ? "degraded" : null,
  ].filter(Boolean);
  if (facts.length) parts.push(el("p", { class: "muted small meta" }, facts.join(" · ")));

  container.replaceChildren(...parts);
}
