// A run: summary, stats, datasets, ledger by tool and column, waterfalls, trace, log, actions.
import {
  api, badge, credits, duration, el, follow, getJSON, idPath, num, post, resumeCommand, text,
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

function cells(...values) {
  return values.map((v, i) =>
    el("td", { class: i > 0 && /^[\d.,\s-]+$/.test(String(v)) ? "num" : null }, v));
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
  document.getElementById("stop").disabled = doc.status !== "running";
  document.getElementById("resume").disabled =
    !["failed", "suspended", "interrupted", "completed_with_errors"].includes(doc.status);

  const waits = document.getElementById("waits");
  waits.hidden = !(doc.status === "suspended" && doc.waiting);
  if (!waits.hidden) {
    const w = doc.waiting;
    document.getElementById("waits-text").textContent = w.stop
      ? `Stopped (${w.stop}): nothing paid is lost; Resume continues it.`
      : [w.wake_at ? `a time: ${when(w.wake_at)}` : null,
         doc.awaited_events.length ? `events: ${doc.awaited_events.join(", ")}` : null,
         w.child ? `child play ${w.child}` : null].filter(Boolean).join(" · ");
    const form = document.getElementById("send");
    form.hidden = doc.awaited_events.length === 0;
    const select = document.getElementById("send-key");
    select.replaceChildren(...doc.awaited_events.map((k) => el("option", { value: k }, k)));
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
      el("div", {}, el("dt", {}, k), el("dd", {}, typeof v === "number" ? num(v) : v))),
  );

  table("datasets", doc.datasets.map((d) => el("tr", {},
    el("td", {}, el("a", { href: `/grid/${idPath(runId)}?dataset=${encodeURIComponent(d.name)}` }, d.name),
      d.description ? el("div", { class: "sub" }, d.description) : null),
    ...cells(d.status, num(d.stats.rows ?? d.stored), num(d.stats.rows_executed),
      num(d.stats.rows_reused), num(d.stats.rows_failed), d.columns.join(", ")))));

  table("tools", doc.tools.map((t) => el("tr", {}, ...cells(t.tool, num(t.requests),
    num(t.inputs), num(t.calls), num(t.found), priced(t.credits, t.unit),
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
    trace.push(`${tool}: ${num(t.requests)} requests carrying ${num(t.inputs)} inputs`);
  for (const c of doc.children) trace.push(el("span", {}, "child play ",
    el("a", { href: `/run/${idPath(c.run_id)}` }, `${c.play} (${c.run_id})`),
    `: ${c.status} · ${num(c.rows)} rows · ${credits(c.credits)} credits`));
  for (const [kind, n] of Object.entries(doc.trace.steps)) trace.push(`${n} ${kind} event(s)`);
  if (doc.waiting && !doc.waiting.stop && doc.status === "suspended") trace.push(`waits: ${text(doc.waiting)}`);
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

async function loadColumns() {
  const doc = await getJSON(api(`columns/${idPath(runId)}`));
  const rows = doc.columns.map((c) => el("tr", {}, ...cells(`${c.dataset}.${c.column}`,
    num(c.cells), num(c.found),
    !c.usd ? credits(c.credits) : c.credits ? `${credits(c.credits)} + ${dollars(c.usd)}` : dollars(c.usd),
    Object.entries(c.providers).map(([p, n]) => `${p} ${num(n)}`).join(", "))));
  if (doc.other_credits) {  // paid calls no stored cell claims (outside a dataset)
    rows.push(el("tr", {}, ...cells("(outside the stored cells)", "", "",
      credits(doc.other_credits), "")));
  }
  if (doc.other_usd) {
    rows.push(el("tr", {}, ...cells("(outside the stored cells)", "", "",
      dollars(doc.other_usd), "")));
  }
  table("columns", rows);
}

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
    summary: (s) => { if (s.status !== lastStatus) refreshSoon(); },
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
  } catch (e) { toast(e.message, "error"); }
});

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
