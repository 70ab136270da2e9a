// The row drawer: a row's cells (a nested value field by field), each waterfall's attempts
// step by step, and the row's charges in the ledger. It opens on a cell's click or Enter, and
// gives the focus back where it was when it closes (Escape or its button).
import { valueView, stateWord } from "./cells.js";
import { api, credits, el, getJSON, idPath, STATES } from "./common.js";

function field(label, value) {
  return value === undefined || value === null || value === "" ? null : [el("dt", {}, label), el("dd", {}, value)];
}

// A state with its word: the drawer has room for it.
function stateCell(status) {
  return el("span", { class: `state-${status}` }, el("span", { class: "state" },
    el("span", { class: "icon", "aria-hidden": "true" }, STATES[status]?.icon || "?"), stateWord(status)));
}

function cellBlock(doc, column, meta) {
  const block = el("section", { class: "cell-meta" }, el("h3", {}, column, " ", stateCell(meta.status)));
  block.append(el("dl", {}, ...[
    field("value", valueView(doc.values[column])), field("provider", meta.provider),
    field("cost", credits(meta.cost)), field("reason", meta.reason), field("error", meta.error),
    field("HTTP status", meta.http_status), field("code", meta.code), field("request id", meta.request_id),
  ].filter(Boolean).flat()));
  for (const fall of meta.waterfalls || (meta.waterfall ? [meta.waterfall] : [])) {
    block.append(el("h4", {}, `Waterfall ${fall.id}: ${fall.winner ? `won by ${fall.winner}` : "no step found a value"}`));
    block.append(el("table", { class: "table attempts" },
      el("thead", {}, el("tr", {}, ...["Step", "Provider", "Status", "Cost", "Cached", "Error or reason"].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, ...Object.entries(fall.steps).map(([id, st]) => el("tr", {},
        el("td", {}, id), el("td", {}, st.provider || ""), el("td", {}, stateCell(st.status)),
        el("td", { class: "num" }, credits(st.cost)), el("td", {}, st.cached === undefined ? "" : st.cached ? "yes" : "no"),
        el("td", {}, st.error || st.reason || ""))))));
  }
  return block;
}

function charges(ledger) {
  return [el("h3", {}, "Charges (ledger)"), el("table", { class: "table" },
    el("thead", {}, el("tr", {}, ...["Tool", "Credits", "Found", "Receipt"].map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, ...ledger.map((e) => el("tr", {}, el("td", {}, e.tool),
      el("td", { class: "num" }, credits(e.credits)), el("td", {}, e.found ? "yes" : "no"),
      el("td", { class: "mono receipt" }, e.receipt)))))];
}

/** The drawer of a run's dataset: returns the function that opens it on a row. */
export function rowDrawer(runId, dataset) {
  const drawer = document.getElementById("drawer");
  let returnFocus = null;

  function close() {
    drawer.hidden = true;
    if (returnFocus) returnFocus.focus();
  }
  document.getElementById("drawer-close").addEventListener("click", close);
  drawer.addEventListener("keydown", (e) => { if (e.key === "Escape") close(); });

  return async function open(row) {
    if (!row || row.pending) return; // a pending row has nothing stored yet
    returnFocus = document.activeElement;
    const doc = await getJSON(api(`row/${idPath(runId)}?dataset=${encodeURIComponent(dataset)}&key=${encodeURIComponent(row.key)}`));
    document.getElementById("drawer-title").textContent = `Row ${doc.index + 1}: ${doc.key}`;
    const parts = [el("p", {}, stateCell(doc.status), doc.error ? el("span", { class: "error" }, ` ${doc.error}`) : null)];
    for (const [column, meta] of Object.entries(doc.meta)) parts.push(cellBlock(doc, column, meta));
    if (doc.ledger.length) parts.push(...charges(doc.ledger));
    document.getElementById("drawer-body").replaceChildren(...parts);
    drawer.hidden = false;
    document.getElementById("drawer-close").focus();
  };
}
