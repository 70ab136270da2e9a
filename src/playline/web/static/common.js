// Shared by the pages: JSON reads, CSRF-guarded actions, formatting, cell states.

export const csrf = document.querySelector('meta[name="csrf-token"]').content;
export const styleNonce = document.querySelector('meta[name="style-nonce"]').content;

// Each state: an icon, a word and (in app.css) a colour, so none of them relies on colour.
export const STATES = {
  pending: { icon: "○", text: "pending" },
  queued: { icon: "…", text: "queued" },
  running: { icon: "◐", text: "running" },
  completed: { icon: "✓", text: "done" },
  cached: { icon: "↺", text: "cached" },
  skipped: { icon: "⤼", text: "skipped" },
  not_found: { icon: "∅", text: "not found" },
  failed: { icon: "✕", text: "failed" },
  waiting: { icon: "⏸", text: "waiting" },
};

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = value;
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function api(path) {
  return "/api/" + path;
}

// A run id as a URL's path ends with it: each "/"-separated part (child plays' ids hold "/")
// encoded, so an id holding "?", "#", "%" or a space names its run, not a prefix of it.
export function idPath(runId) {
  return runId.split("/").map(encodeURIComponent).join("/");
}

/** `playline resume` of a run, to paste in a shell: its id quoted when it needs to be, after
 * `--` when it could be read as an option. */
export function resumeCommand(runId, ...flags) {
  const plain = /^[\w@%+=:,./-]+$/.test(runId);
  const word = plain ? runId : "'" + runId.replaceAll("'", "'\\''") + "'";
  return ["playline resume", ...flags, ...(runId.startsWith("-") ? ["--"] : []), word].join(" ");
}

export async function getJSON(path) {
  const response = await fetch(path, { headers: { Accept: "application/json" } });
  const doc = await response.json();
  if (!response.ok) throw new Error(doc.error || response.statusText);
  return doc;
}

export async function post(path, body = {}) {
  const response = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
    body: JSON.stringify(body),
  });
  const doc = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(doc.error || response.statusText);
  return doc;
}

let toastTimer = null;
// A notice at the bottom right; it goes away after 8 s unless it must stay (sticky).
export function toast(message, kind = "info", sticky = false) {
  const box = document.getElementById("toast");
  box.textContent = message;
  box.dataset.kind = kind;
  box.hidden = false;
  clearTimeout(toastTimer);
  if (!sticky) toastTimer = setTimeout(() => (box.hidden = true), 8000);
}

export function setLive(text) {
  document.getElementById("live").textContent = text;
}

export function num(value, digits = 0) {
  if (value === null || value === undefined || value === "") return "";
  return Number(value).toLocaleString(undefined, { maximumFractionDigits: digits });
}

export function credits(value) {  // as `playline show`: 6.3529 -> 6.35, 0.00421 -> 0.0042
  if (value === null || value === undefined || value === "") return "";
  if (!value || Math.abs(value) >= 1) return num(value, 2);
  return Number(value).toLocaleString(undefined, { maximumSignificantDigits: 2 });
}

export function when(at) {
  if (!at) return "";
  return new Date(at * 1000).toLocaleString();
}

export function duration(seconds) {
  if (seconds === null || seconds === undefined) return "";
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  const m = Math.floor(seconds / 60);
  if (m < 60) return `${m} min ${Math.round(seconds % 60)} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

export function badge(node, status) {
  node.textContent = status;
  node.className = `badge status-${status}`;
}

export function text(value) {
  if (value === null || value === undefined) return "";
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

// A stream that reconnects by itself (EventSource sends Last-Event-ID on its own). A stream
// the UI refuses (too many tabs open on it: 503 or 429; a bad seq: 400) is not retried by the
// EventSource, nor here: the page says why and stays as it is until reloaded.
export function follow(url, handlers) {
  const source = new EventSource(url);
  for (const [name, handler] of Object.entries(handlers)) {
    source.addEventListener(name, (event) => handler(JSON.parse(event.data), event));
  }
  source.onopen = () => setLive("live");
  source.onerror = () => {
    if (source.readyState !== EventSource.CLOSED) return setLive("reconnecting…");
    setLive("not live");
    refused(url);
  };
  return source;
}

// An EventSource does not tell why it was refused: one request asks (and lets go of a stream
// the UI would open by now).
async function refused(url) {
  let message = "The live view stopped; reload the page to follow the run again.";
  const controller = new AbortController();
  try {
    const response = await fetch(url, { signal: controller.signal });
    if (!response.ok) message = (await response.json()).error || message;
  } catch {
    // the UI is gone: the message above says enough
  } finally {
    controller.abort();
  }
  toast(message, "error", true);
}
