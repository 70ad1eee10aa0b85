// Building DOM nodes from data. Text always goes in as text nodes (textContent), never as markup:
// source titles, statements and URLs are untrusted.

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

export function append(node, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function clear(node) {
  node.replaceChildren();
  return node;
}

export function show(node, visible = true) {
  node.hidden = !visible;
}

// Only http(s) URLs become links; anything else (javascript:, data:, file:) is shown as text.
export function safeHref(url) {
  try {
    const parsed = new URL(String(url));
    return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : null;
  } catch {
    return null;
  }
}

export function externalLink(url, text) {
  const href = safeHref(url);
  if (!href) return el("span", { class: "plain-url" }, text);
  return el("a", { href, target: "_blank", rel: "noopener noreferrer nofollow" }, text);
}

export function formatTime(iso) {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? String(iso) : date.toLocaleString();
}

export function percent(value) {
  return typeof value === "number" ? `${Math.round(value * 100)}%` : "–";
}

// "1 cycle", "2 cycles", "0 sources".
export function plural(count, noun, nouns = `${noun}s`) {
  return `${count} ${count === 1 ? noun : nouns}`;
}
