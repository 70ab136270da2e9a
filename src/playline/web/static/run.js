// A run: summary, progress, stats, datasets, ledger by tool and column, waterfalls, trace, log,
// actions. Every line and number is defined in docs/guide/reading-a-run.md.
import {
  api, badge, credits, duration, el, follow, getJSON, idPath, num, post, resumeCommand,
  toast, when,
} from "./common.js";

const root = document.getElementById("run");
const runId = root.dataset.runId;
let lastStatus = null;
let refetching = null;

function table(id, rows) {
  const body = document.querySelector(`#${id} tbody`);
  body.replaceChildren(...rows);
  document.getElementById(id).closest("section").hidden = rows.length === 0;
}

function cells(...values) {  // a number (or a number with a note) is right-aligned
  return values.map((v, i) => el("td", {
    class: i > 0 && /^[$\d.,\s-]+( [+(].*)?$/.test(v instanceof Node ? v.textContent : String(v))
      ? "num" : null,
  }, v));
}

// a dataset's rows as stored: as its last attempt counted them, less those it left pending
// (a stop, a budget); while it runs, the rows stored so far
function datasetRows(d) {
  return d.stats.rows === undefined ? d.stored : d.stats.rows - (d.stats.rows_pending || 0);
}

// the rows its last attempt ran to their end (failed ones too): not reused, not left pending
function datasetRan(d) {
  const s = d.stats;
  return s.rows === undefined ? s.rows_executed
    : s.rows - (s.rows_reused || 0) - (s.rows_pending || 0);
}

// why neither Stop nor Resume can act on a run in this status
function whyNot(status) {
  if (status === "completed") return "The run completed: nothing to stop or resume.";
  if (status === "queued") return "Queued on Temporal: its workers start it.";
  if (status === "running") return "";
  return `The run is ${status}: it cannot be resumed now.`;
}

function render(doc) {
  badge(document.getElementById("status"), doc.status);
  document.getElementById("sub").textContent =
    `play ${doc.play} · started ${when(doc.created_at)} · ${duration(doc.duration)} · ` +
    `${doc.attempts} attempt(s)` + (doc.holder ? ` · held by ${doc.holder}` : "") +
    (doc.trace.source ? ` · ${doc.trace.source.file}:${doc.trace.source.function}` : "");
  const error = document.getElementById("error");
  error.hidden = !doc.error;
  error.textContent = doc.error || "";
  const stop = document.getElementById("stop");
  const resume = document.getElementById("resume");
  stop.disabled = doc.status !== "running";
  resume.disabled =
    !["failed", "suspended", "interrupted", "completed_with_errors"].includes(doc.status);
  // a button that cannot act says why (ui.md): beside it, and as its title
  const why = stop.disabled && resume.disabled ? whyNot(doc.status) : "";
  stop.title = stop.disabled ? `Nothing to stop: the run is ${doc.status}.` : "";
  resume.title = resume.disabled ? whyNot(doc.status) : "";
  document.getElementById("why-not").textContent = why;

  const waits = document.getElementById("waits");
  waits.hidden = !(doc.status === "suspended" && doc.waiting);
  if (!waits.hidden) {
    const w = doc.waiting;
    // an event sent is the run's until a worker or Resume takes it: only the others to send
    const sent = new Set(doc.events_sent);
    const eventText = (k) => (sent.has(k) ? `${k} (sent: a worker or Resume goes on)` : k);
    const unsent = doc.awaited_events.filter((k) => !sent.has(k));
    document.getElementById("waits-text").textContent = w.stop
      ? `${w.stop === "stopped" ? "Stopped" : `Stopped (${w.stop})`}: nothing paid is lost; ` +
        "Resume continues it."
      : [w.wake_at ? `a time: ${when(w.wake_at)}` : null,
         doc.awaited_events.length ? `events: ${doc.awaited_events.map(eventText).join(", ")}`
           : null,
         w.child ? `child play ${w.child}` : null].filter(Boolean).join(" · ");
    const form = document.getElementById("send");
    form.hidden = unsent.length === 0;
    const select = document.getElementById("send-key");
    select.replaceChildren(...unsent.map((k) => el("option", { value: k }, k)));
  }

  const doubt = doc.in_doubt;
  document.getElementById("doubt").hidden = !doubt.calls;
  if (doubt.calls) {  // as `playline show` says it
    const tools = Object.entries(doubt.tools).map(([tool, n]) => `${num(n)} of ${tool}`);
    const live = ["running", "queued"].includes(doc.status);
    document.getElementById("doubt-text").textContent =
      `${num(doubt.calls)} call(s) may have been charged with no record of it: ` +
      `${tools.join(", ")}.` + (live ? "" : " Resume re-sends those whose provider recognises " +
      "idempotency keys (no second charge); `" +
      resumeCommand(runId, "--retry-in-doubt") + "` buys the others again.");
  }

  renderJobs(doc.jobs);
  renderProgress(doc);

  const s = doc.stats || {};
  const child = doc.trace.totals.child_credits;
  const stats = [
    ["rows", doc.rows], ["failed", doc.rows_failed], ["reused", doc.rows_reused],
    ["credits", credits(doc.credits) + (child ? ` (${credits(child)} by child plays)` : "")],
    ["dollars (LLM calls)", doc.trace.totals.usd ? dollars(doc.trace.totals.usd) : null],
    ["live calls", s.tool_calls_live], ["cached calls", s.tool_calls_cached],
    ["calls not sent (budget)", s.tool_calls_not_sent || null],
    ["calls in doubt", doubt.calls || null], ["provider requests", s.tool_requests],
  ];
  document.getElementById("stats").replaceChildren(
    ...stats.filter(([, v]) => v !== undefined && v !== null).map(([k, v]) =>
      el("div", { "data-stat": k }, el("dt", {}, k),
        el("dd", {}, typeof v === "number" ? num(v) : v))),
  );

  table("datasets", doc.datasets.map((d) => el("tr", {},
    el("td", {}, el("a", { href: `/grid/${idPath(runId)}?dataset=${encodeURIComponent(d.name)}` }, d.name),
      d.description ? el("div", { class: "sub" }, d.description) : null),
    ...cells(d.status, num(datasetRows(d)), num(datasetRan(d)),
      num(d.stats.rows_reused), num(d.stats.rows_failed), d.columns.join(", ")))));

  table("tools", doc.tools.map((t) => el("tr", {}, ...cells(t.tool, num(t.requests),
    inputs(t), num(t.calls), num(t.found), priced(t.credits, t.unit),
    priced(t.credits_per_hit, t.unit), reportedCost(t.reported)))));

  const falls = document.getElementById("waterfalls");
  falls.replaceChildren(...doc.waterfalls.map((w) => el("div", { class: "waterfall" },
    el("h3", {}, `${w.id}: ${num(w.satisfied)} of ${num(w.rows)} rows found ` +
      `(${w.coverage === null ? "-" : Math.round(w.coverage * 100)}%), ${credits(w.credits)} credits, ` +
      `${credits(w.credits_per_hit)} per hit`),
    el("table", { class: "table" },
      el("thead", {}, el("tr", {}, ...["Step", "Attempts", "Hits", "Not found", "Failed",
        "Skipped", "Credits", "Credits per hit"].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, ...w.steps.map((st) => el("tr", {}, ...cells(st.id, num(st.attempts),
        num(st.hits), num(st.not_found), num(st.failed), num(st.skipped), credits(st.credits),
        credits(st.credits_per_hit)))))))));
  falls.closest("section").hidden = doc.waterfalls.length === 0;

  const trace = [];
  for (const d of doc.trace.datasets) trace.push(`dataset ${d.name}: ${d.status}`);
  for (const [tool, t] of Object.entries(doc.trace.tools))
    trace.push(`${tool}: ${num(t.requests)} request${t.requests === 1 ? "" : "s"} carrying ` +
      `${num(t.inputs)} input${t.inputs === 1 ? "" : "s"}`);
  for (const c of doc.children) trace.push(el("span", {}, "child play ",
    el("a", { href: `/run/${idPath(c.run_id)}` }, `${c.play} (${c.run_id})`),
    `: ${c.status} · ${num(c.rows)} rows · ${credits(c.credits)} credits`));
  for (const [kind, n] of Object.entries(doc.trace.steps)) trace.push(`${n} ${kind} event(s)`);
  if (doc.waiting && !doc.waiting.stop && doc.status === "suspended") {
    const w = doc.waiting;
    const events = w.events || [];
    const what = [
      events.length ? `the event${events.length === 1 ? "" : "s"} ${events.join(", ")}` : null,
      w.wake_at ? `its timer, due ${when(w.wake_at)}` : null,
    ].filter(Boolean).join(" or ");
    trace.push(`waits for ${what || "a resume"}`);
  }
  document.getElementById("trace").replaceChildren(...trace.map((t) => el("li", {}, t)));

  if (doc.status !== lastStatus) {
    lastStatus = doc.status;
    loadColumns();
  }
}

// The jobs the run's calls wait on (a provider's batch, an async tool's job), as `playline
// show` lists them: submitted, not answered yet; polled by the run, or by a resume.
function renderJobs(jobs) {
  document.getElementById("jobs").hidden = !jobs.calls;
  if (!jobs.calls) return;
  const count = jobs.jobs.length + jobs.more;
  document.getElementById("jobs-text").textContent =
    `${num(jobs.calls)} call(s) wait on ${num(count)} submitted job(s); each is polled until ` +
    "it answers, never submitted again." +
    (jobs.more ? ` The oldest ${jobs.jobs.length} are listed.` : "");
  const rows = jobs.jobs.map((j) => el("tr", {},
    ...cells(j.tool, el("span", { class: "mono" }, j.label), num(j.calls), when(j.since),
      j.state === "polling" ? "submitted, polled by the run"
        : `submitted; its attempt stopped: Resume (\`${resumeCommand(runId)}\`) polls it`)));
  document.querySelector("#jobs-table tbody").replaceChildren(...rows);
}

function dollars(value) {
  return value === null || value === undefined ? "" : `$${num(value, 4)}`;
}

function priced(value, unit) {  // a tool's cost in its unit: credits, or dollars
  return unit === "usd" ? dollars(value) : credits(value);
}

// The inputs a tool's requests carried: at least its live calls. Those an attempt sent but was
// killed before writing down are counted from their answers in the ledger, and said so.
function inputs(t) {
  if (!t.unlogged) return num(t.inputs);
  return el("span", { class: "unlogged", title: `${num(t.unlogged)} of them counted from ` +
    "their answers in the ledger: their attempt was killed before it wrote their requests " +
    "down" }, `${num(t.inputs)} (${num(t.unlogged)} from the ledger)`);
}

function money(amountCredits, amountUsd) {
  if (!amountUsd) return credits(amountCredits);
  return amountCredits ? `${credits(amountCredits)} + ${dollars(amountUsd)}` : dollars(amountUsd);
}

const UNFINISHED = "calls paid for rows that have not finished: still running, or stopped " +
  "before they did (a resume answers these calls from their receipts, free); their cells are " +
  "stored, and counted under Cells, when their rows finish";
const HIDDEN = "a hidden column (its name starts with _): its cells are never stored, what its " +
  "calls cost is counted here";
const OUTSIDE = "calls the play's own code made outside any dataset's rows (a ctx.tool or " +
  "ctx.llm in the play function, a durable boundary), so no column made them";

async function loadColumns() {
  const doc = await getJSON(api(`columns/${idPath(runId)}`));
  const rows = doc.columns.map((c) => {
    const name = `${c.dataset}.${c.column}`;
    const paid = money(c.credits, c.usd);
    const unstored = money(c.unstored_credits, c.unstored_usd);
    return el("tr", {}, ...cells(
      c.hidden ? el("span", { title: HIDDEN }, `${name} (hidden, not stored)`) : name,
      num(c.cells), num(c.found),
      c.unstored_credits || c.unstored_usd
        ? el("span", { class: "unstored", title: UNFINISHED },
          `${paid} (${unstored} for rows not finished)`)
        : paid,
      Object.entries(c.providers).map(([p, n]) => `${p} ${num(n)}`).join(", ")));
  });
  if (doc.other_credits || doc.other_usd) {
    rows.push(el("tr", {}, ...cells(el("span", { title: OUTSIDE }, "Outside any dataset"),
      "", "", money(doc.other_credits, doc.other_usd), "")));
  }
  table("columns", rows);
}

// Progress: per dataset, rows done (stored: finished, failed or waiting) of the rows its input
// holds, and while it runs the rate over the last RATE_WINDOW ms (rows/s) and the time left.
// The run's summaries on the stream say how many rows are stored; the page samples them.
const RATE_WINDOW = 30_000;
const progress = { datasets: [], others: 0, live: false, samples: new Map() };

function renderProgress(doc) {
  progress.live = doc.status === "running";
  const before = new Map(progress.datasets.map((d) => [d.name, d.done]));
  progress.datasets = doc.datasets.map((d) => ({
    name: d.name, status: d.status, total: d.total ?? null,
    // a run's stored rows only grow: a summary read after this document may have said more
    done: Math.max(d.stored, d.status === "running" ? before.get(d.name) ?? 0 : 0),
    leftOut: (d.stats.rows_duplicate || 0) + (d.stats.rows_seen || 0),
  }));
  const running = progress.datasets.filter((d) => d.status === "running");
  progress.others = progress.datasets.filter((d) => d.status !== "running")
    .reduce((sum, d) => sum + d.done, 0);
  for (const d of running) sample(d.name, d.done);
  drawProgress();
}

function stored(summary) {  // a run summary's stored rows, given to the one running dataset
  if (summary.status !== "running") return;
  const rows = document.querySelector('#stats [data-stat="rows"] dd');
  if (rows) rows.textContent = num(summary.rows);
  const running = progress.datasets.filter((d) => d.status === "running");
  if (running.length !== 1) return;  // several at once: the next refresh splits them
  running[0].done = Math.max(0, summary.rows - progress.others);
  sample(running[0].name, running[0].done);
  drawProgress();
}

function sample(name, done) {
  const now = performance.now();
  let kept = progress.samples.get(name) || [];
  if (kept.length && done < kept[kept.length - 1][1]) kept = [];  // counted again: start over
  kept.push([now, done]);
  // the samples of the window, and the last one before it (the window's start)
  while (kept.length > 2 && kept[1][0] < now - RATE_WINDOW) kept.shift();
  progress.samples.set(name, kept);
}

function rate(name) {  // rows per second over the window, null until two samples tell
  const kept = progress.samples.get(name) || [];
  if (kept.length < 2) return null;
  const [first, last] = [kept[0], kept[kept.length - 1]];
  const seconds = (last[0] - first[0]) / 1000;
  return seconds > 0 ? (last[1] - first[1]) / seconds : null;
}

function drawProgress() {
  const shown = progress.datasets;
  document.getElementById("progress").hidden = shown.length === 0;
  document.getElementById("progress-rows").replaceChildren(...shown.map((d) => {
    const live = d.status === "running" && progress.live;
    const bar = el("progress", { "aria-label": `${d.name}: rows done` });
    if (d.total !== null) {
      bar.max = Math.max(d.total, d.done);
      bar.value = d.done;
    } else if (!live) {
      bar.max = bar.value = Math.max(d.done, 1);  // ended: all of it
    }
    const parts = [el("span", { class: "done" }, doneText(d, live))];
    if (live) {
      const perSecond = rate(d.name);
      const left = d.total === null || !perSecond ? null
        : Math.max(0, d.total - d.done) / perSecond;
      parts.push(el("span", { class: "rate" },
        perSecond === null ? "measuring rows/s" : `${num(perSecond, 1)} rows/s`));
      parts.push(el("span", { class: "eta" },
        left === null ? "ETA unknown" : `ETA ${duration(left)}`));
    } else {
      parts.push(el("span", { class: "ended" }, d.status));
      if (d.leftOut) parts.push(el("span", { class: "left-out" }, `${num(d.leftOut)} left out ` +
        "(duplicate keys, or rows an earlier run completed)"));
    }
    const line = parts.flatMap((part, i) => (i ? [" · ", part] : [part]));
    return el("div", { class: "progress", "data-dataset": d.name },
      el("span", { class: "name" }, d.name), " ", bar, " ", ...line);
  }));
}

function doneText(d, live) {
  if (d.total === null) return `${num(d.done)} rows` + (live ? " (total unknown)" : "");
  const percent = Math.floor((100 * d.done) / Math.max(d.total, 1));
  return `${num(d.done)} of ${num(d.total)} rows (${percent}%)`;
}

setInterval(() => {  // no summary comes while no row finishes: the rate falls all the same
  if (!progress.live) return;
  for (const d of progress.datasets) if (d.status === "running") sample(d.name, d.done);
  drawProgress();
}, 2000);

// What no event announces follows a running run all the same: its duration, the rows of its
// datasets, the ledger by column (read from the ledger, not from the stream).
const LIVE_EVERY = 5000;
setInterval(() => {
  if (lastStatus !== "running") return;
  refreshSoon();
  loadColumns();
}, LIVE_EVERY);

async function refresh() {
  render(await getJSON(api(`run/${idPath(runId)}`)));
}

function refreshSoon() {
  if (refetching) return;
  refetching = setTimeout(async () => {
    refetching = null;
    await refresh();
  }, 1000);
}

const log = document.getElementById("log");
function appendLog(lines) {
  const follow = document.getElementById("follow").checked;
  log.append(...lines.map((l) => el("li", {}, el("time", {}, when(l.at)), " ", l.message)));
  if (follow) log.scrollTop = log.scrollHeight;
}

async function start() {
  const doc = await getJSON(api(`run/${idPath(runId)}`));
  render(doc);
  const lines = await getJSON(api(`log/${idPath(runId)}`));
  appendLog(lines.lines);
  follow(api(`stream/${idPath(runId)}?after=${doc.seq}`), {
    changes: (d) => {
      const logs = d.events.filter((e) => e.kind === "log");
      if (logs.length) appendLog(logs);
      if (d.events.some((e) => e.kind !== "log")) refreshSoon();
    },
    summary: (s) => {
      stored(s);
      if (s.status !== lastStatus) refreshSoon();
    },
    reload: () => refreshSoon(),
  });
}

document.getElementById("stop").addEventListener("click", async () => {
  try {
    toast((await post(api(`stop/${idPath(runId)}`))).message);
    refreshSoon();
  } catch (e) { toast(e.message, "error"); }
});
document.getElementById("resume").addEventListener("click", async () => {
  try {
    toast((await post(api(`resume/${idPath(runId)}`))).message);
    refreshSoon();
  } catch (e) { toast(e.message, "error"); }
});
document.getElementById("send").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = new FormData(event.target);
  try {
    toast((await post(api("event"), { key: form.get("key"), payload: form.get("payload") })).message);
    refreshSoon();
  } catch (e) { toast(e.message, "error"); }
});

// What each column of the ledgers counts, as a tooltip on its header (reading-a-run.md).
const DEFINED = {
  tools: [null, "Requests sent to the provider (a batch of many inputs is one), each retry again",
    "The inputs those requests carried, each retry again: never fewer than the live calls",
    "Calls the provider answered, paid as its price says (calls answered by a receipt or " +
      "shared with an identical call in flight are free, and not counted)",
    "Live calls that found something", "What the live calls cost, over every attempt",
    "Credits divided by found", "What the provider said it charged, where it says so"],
  columns: [null, "Cells stored (a row's cells are stored when the row finishes)",
    "Stored cells with a value (done, or from a receipt)",
    "What the column's calls cost over every attempt, its unfinished rows' included",
    "Stored cells per tool that gave their value"],
};
for (const [id, titles] of Object.entries(DEFINED)) {
  document.querySelectorAll(`#${id} thead th`).forEach((th, i) => {
    if (titles[i]) th.title = titles[i];
  });
}

start();

// What the provider said it charged, where it says so: flagged when it is not what the tool
// declares (the ledger and budgets count the higher of the two for each call).
function reportedCost(reported) {
  if (!reported) return "-";
  const said = `${credits(reported.reported)} for ${num(reported.calls)} calls`;
  if (!reported.mismatch) return said;
  return el("span", { class: "mismatch", title: "the ledger and budgets count the higher" },
    `${said} (declared ${credits(reported.declared)})`);
}
