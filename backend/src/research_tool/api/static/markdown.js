// The inline markdown the answer and the findings carry: code spans (`name`), emphasis (_note_, *word*)
// and strong emphasis (**word**), after CommonMark's rules for delimiter runs. Nothing else is markup:
// links, images and HTML stay text. Every piece of text becomes a text node (or what `textNodes` makes of
// it, e.g. citation links); no string is ever parsed as HTML.

import { el } from "./dom.js";

const WHITESPACE = /\s/u;
const PUNCTUATION = /[\p{P}\p{S}]/u;

function isSpace(ch) {
  return ch === undefined || WHITESPACE.test(ch); // the line's start and end count as whitespace
}

function isPunct(ch) {
  return ch !== undefined && PUNCTUATION.test(ch);
}

// A delimiter run's powers (CommonMark 6.2: left- and right-flanking runs; `_` not inside a word).
function delimiter(char, count, before, after) {
  const left = !isSpace(after) && (!isPunct(after) || isSpace(before) || isPunct(before));
  const right = !isSpace(before) && (!isPunct(before) || isSpace(after) || isPunct(after));
  const canOpen = char === "*" ? left : left && (!right || isPunct(before));
  const canClose = char === "*" ? right : right && (!left || isPunct(after));
  return { kind: "delim", char, count, original: count, canOpen, canClose };
}

// Text, code spans and delimiter runs, left to right.
function tokenize(line) {
  const items = [];
  let text = "";
  const flush = () => {
    if (text) items.push({ kind: "text", text });
    text = "";
  };
  let i = 0;
  while (i < line.length) {
    const ch = line[i];
    if (ch === "`") {
      let end = i;
      while (line[end] === "`") end += 1;
      const fence = line.slice(i, end);
      const close = findFence(line, fence, end);
      if (close >= 0) {
        flush();
        let code = line.slice(end, close);
        if (code.length > 2 && code.startsWith(" ") && code.endsWith(" ") && code.trim()) code = code.slice(1, -1);
        items.push({ kind: "code", text: code });
        i = close + fence.length;
      } else {
        text += fence;
        i = end;
      }
      continue;
    }
    if (ch === "*" || ch === "_") {
      let end = i;
      while (line[end] === ch) end += 1;
      flush();
      items.push(delimiter(ch, end - i, line[i - 1], line[end]));
      i = end;
      continue;
    }
    text += ch;
    i += 1;
  }
  flush();
  return items;
}

// The next backtick run exactly as long as `fence`, from `from` on; -1 when there is none.
function findFence(line, fence, from) {
  let at = line.indexOf(fence, from);
  while (at >= 0) {
    let end = at;
    while (line[end] === "`") end += 1;
    if (end - at === fence.length) return at;
    at = line.indexOf(fence, end);
  }
  return -1;
}

// CommonMark's "process emphasis": each closer, left to right, takes the nearest opener it may pair with.
function pairEmphasis(items) {
  for (let c = 0; c < items.length; c += 1) {
    const closer = items[c];
    if (closer.kind !== "delim" || !closer.canClose) continue;
    while (closer.count > 0) {
      let o = c - 1;
      for (; o >= 0; o -= 1) {
        const opener = items[o];
        if (opener.kind !== "delim" || opener.char !== closer.char || !opener.canOpen || opener.count === 0) continue;
        const both = opener.canClose || closer.canOpen;
        const multipleOfThree = (opener.original + closer.original) % 3 === 0;
        if (both && multipleOfThree && !(opener.original % 3 === 0 && closer.original % 3 === 0)) continue;
        break;
      }
      if (o < 0) break;
      const opener = items[o];
      const used = opener.count >= 2 && closer.count >= 2 ? 2 : 1;
      opener.count -= used;
      closer.count -= used;
      const inner = items.splice(o + 1, c - o - 1);
      items.splice(o + 1, 0, { kind: used === 2 ? "strong" : "em", children: inner });
      c = o + 2; // the closer now sits right after the new node
    }
  }
  return items;
}

function toNodes(items, textNodes) {
  const nodes = [];
  for (const item of items) {
    if (item.kind === "text") nodes.push(...textNodes(item.text));
    else if (item.kind === "code") nodes.push(el("code", {}, item.text));
    else if (item.kind === "em" || item.kind === "strong") nodes.push(el(item.kind, {}, toNodes(item.children, textNodes)));
    else if (item.count > 0) nodes.push(...textNodes(item.char.repeat(item.count)));
  }
  return nodes;
}

// One line of markdown as DOM nodes. `textNodes(text)` turns plain text into nodes (strings are fine).
export function inlineMarkdown(line, textNodes = (text) => [text]) {
  return toNodes(pairEmphasis(tokenize(String(line))), textNodes);
}
