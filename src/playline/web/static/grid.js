// A dataset's rows in AG Grid's Infinite Row Model: windows of rows fetched from the store,
// cells changed live through the run's event stream, chips that filter by state (kept in the
// URL), sorting by a column, and a drawer with a row's cells, waterfall steps and charges.
import {
  CellStyleModule, ColumnApiModule, createGrid, EventApiModule, InfiniteRowModelModule,
  ModuleRegistry, RenderApiModule, RowApiModule, RowStyleModule, ScrollApiModule, themeQuartz,
  TooltipModule,
} from "./vendor/ag-grid.min.js";
import {
  api, badge, credits, el, follow, getJSON, idPath, num, STATES, styleNonce, text,
} from "./common.js";
import { BLOCK, windowURL } from "./window.js";

ModuleRegistry.registerModules([
  CellStyleModule, ColumnApiModule, EventApiModule, InfiniteRowModelModule, RenderApiModule,
  RowApiModule, RowStyleModule, ScrollApiModule, TooltipModule,
]);

const page = document.getElementById("grid-page");
const runId = page.dataset.runId;
const dataset = page.dataset.dataset;
const columns = JSON.parse(page.dataset.columns);
const params = new URLSearchParams(location.search);
let state = params.get("state") || "";
let sort = params.get("sort") || "";
let desc = params.get("desc") === "1";

// What tests and the benchmark read: when rows first showed, which seq is applied.
const probe = (window.playlineGrid = {
  firstRowsAt: null, appliedSeq: 0, changesApplied: 0, messages: 0, reloads: 0,
  streamSeq: 0, frames: 0,
});

function stateCell(status) {
  const s = STATES[status] || { icon: "?", text: status };
  return el("span", { class: "state", title: s.text },
    el("span", { class: "icon", "aria-hidden": "true" }, s.icon), el("span", { class: "word" }, s.text));
}

function renderCell(p) {
  const column = p.colDef.field;
  const row = p.data;
  if (!row) return el("span", { class: "loading" }, "…");
  const value = row.values[column];
  const status = row.cells[column];
  const shown = el("span", { class: "value" }, text(value));
  if (!status) return shown;
  return el("span", { class: "cell-in" }, stateCell(status), shown);
}

const columnDefs = [
  {
    headerName: "#", colId: "_index", width: 80, sortable: false,
    valueGetter: (p) => (p.data ? p.data.index + 1 : ""),
    cellClass: "index",
  },
  {
    headerName: "row", colId: "_status", width: 120, sortable: false,
    cellRenderer: (p) => (p.data ? stateCell(p.data.status) : ""),
    cellClass: (p) => `row-state state-${p.data ? p.data.status : "pending"}`,
  },
  ...columns.map((name) => ({
    headerName: name, field: name, colId: name, sortable: true, minWidth: 120, flex: 1,
    initialSort: sort === name ? (desc ? "desc" : "asc") : null,
    valueGetter: (p) => (p.data ? p.data.values[name] : undefined),
    cellRenderer: renderCell,
    cellClass: (p) => `state-${(p.data && p.data.cells[name]) || "none"}`,
    tooltipValueGetter: (p) => (p.data && p.data.cells[name] ? `${STATES[p.data.cells[name]]?.text || p.data.cells[name]}: ${text(p.data.values[name])}` : text(p.value)),
  })),
];

let streamStarted = false;
let total = null;

async function fetchWindow(offset, limit) {
  const url = windowURL(runId, dataset, offset, limit, state, sort, desc);
  const early = window.playlineFirstWindow;
  window.playlineFirstWindow = null;
  if (early && early.url === url) {
    const doc = await early.doc;
    if (doc) return doc;
  }
  return getJSON(url);
}

const datasource = {
  getRows: async (p) => {
    const sortModel = p.sortModel && p.sortModel[0];
    const wanted = sortModel ? sortModel.colId : "";
    const wantedDesc = sortModel ? sortModel.sort === "desc" : false;
    if (wanted !== sort || wantedDesc !== desc) {
      sort = wanted; desc = wantedDesc;
      keepURL();
    }
    try {
      const doc = await fetchWindow(p.startRow, p.endRow - p.startRow);
      total = doc.total;
      p.successCallback(doc.rows, doc.total);
      shown();
      if (probe.firstRowsAt === null && doc.rows.length) {
        requestAnimationFrame(() => { probe.firstRowsAt = performance.now(); });
      }
      if (!streamStarted) { streamStarted = true; startStream(doc.seq); }
    } catch (e) {
      p.failCallback();
    }
  },
};

const grid = createGrid(document.getElementById("grid"), {
  // The page's own fonts: the theme's default would come from a web font service.
  theme: themeQuartz.withParams({ fontFamily: "inherit", headerFontFamily: "inherit", cellFontFamily: "inherit" }),
  styleNonce,
  rowModelType: "infinite",
  datasource,
  cacheBlockSize: BLOCK,
  maxBlocksInCache: 20,
  getRowId: (p) => p.data.key,
  columnDefs,
  defaultColDef: { resizable: true, suppressHeaderMenuButton: true },
  ensureDomOrder: true,
  rowHeight: 34,
  tooltipShowDelay: 400,
  onCellClicked: (e) => openDrawer(e.data),
  onCellKeyDown: (e) => {
    if (e.event && e.event.key === "Enter") openDrawer(e.data);
  },
});
probe.api = grid;

// live changes, applied once per animation frame to the rows the grid holds
const pending = new Map();
let pendingSeq = 0;
let scheduled = false;

const PER_FRAME = 400; // row changes applied per animation frame, so no frame runs long

function applyPending() {
  scheduled = false;
  let budget = PER_FRAME;
  for (const [key, change] of pending) {
    if (budget-- === 0) break;
    pending.delete(key);
    const node = grid.getRowNode(key);
    if (node && node.data) {
      const row = node.data;
      node.setData({
        ...row,
        status: change.status ?? row.status,
        error: change.error === undefined ? row.error : change.error,
        values: { ...row.values, ...change.values },
        cells: { ...row.cells, ...change.cells },
      });
    }
  }
  if (pending.size) {
    scheduled = true;
    requestAnimationFrame(applyPending);
  } else {
    probe.appliedSeq = pendingSeq;
  }
}

function queue(rows, seq) {
  for (const [key, change] of Object.entries(rows)) {
    const before = pending.get(key);
    if (before) {
      before.values = { ...before.values, ...change.values };
      before.cells = { ...before.cells, ...change.cells };
      if (change.status !== undefined) { before.status = change.status; before.error = change.error; }
    } else {
      pending.set(key, change);
    }
    probe.changesApplied += Object.keys(change.cells || {}).length;
  }
  pendingSeq = seq;
  if (!scheduled) { scheduled = true; requestAnimationFrame(applyPending); }
}

let lastRows = null;
let refreshTimer = null;
function refreshSoon() {
  if (refreshTimer) return;
  refreshTimer = setTimeout(() => { refreshTimer = null; grid.refreshInfiniteCache(); }, 500);
}

function startStream(seq) {
  follow(api(`stream/${idPath(runId)}?dataset=${encodeURIComponent(dataset)}&after=${seq}`), {
    changes: (d, event) => {
      probe.messages += 1;
      probe.streamSeq = d.seq;
      queue(d.rows, d.seq);
    },
    reload: (d) => {
      probe.reloads += 1;
      probe.streamSeq = d.seq;
      pendingSeq = d.seq;
      grid.refreshInfiniteCache();
      requestAnimationFrame(() => { probe.appliedSeq = d.seq; });
    },
    summary: (s) => {
      badge(document.getElementById("status"), s.status);
      if (!s.counts) return;
      chips(s.counts);
      const rows = state ? s.counts.rows_with[state] || 0 : s.counts.rows;
      if (lastRows !== null && rows !== lastRows && rows !== total) {
        total = rows;
        grid.setRowCount(rows, true);
        refreshSoon();
      }
      lastRows = rows;
    },
  });
}

// chips: counts per state; the chosen one filters rows, kept in the URL
function chips(counts) {
  document.getElementById("count-all").textContent = num(counts.rows);
  for (const chip of document.querySelectorAll(".chip[data-state]")) {
    const s = chip.dataset.state;
    if (!s) continue;
    const n = counts.rows_with[s] || 0;
    chip.querySelector(".count").textContent = num(n);
    chip.hidden = n === 0 && s !== state;
    chip.querySelector(".icon").textContent = STATES[s]?.icon || "";
  }
}

function keepURL() {
  const q = new URLSearchParams({ dataset });
  if (state) q.set("state", state);
  if (sort) { q.set("sort", sort); if (desc) q.set("desc", "1"); }
  history.replaceState(null, "", `?${q}`);
}

function shown() {
  const what = state ? `${num(total)} rows with a cell ${STATES[state]?.text || state}` : `${num(total)} rows`;
  document.getElementById("shown").textContent = what + (sort ? `, by ${sort}${desc ? " (descending)" : ""}` : "");
}

for (const chip of document.querySelectorAll(".chip[data-state]")) {
  chip.addEventListener("click", () => {
    state = chip.dataset.state;
    for (const c of document.querySelectorAll(".chip[data-state]"))
      c.setAttribute("aria-pressed", String(c === chip));
    keepURL();
    lastRows = null;
    grid.setGridOption("datasource", datasource);
  });
  chip.setAttribute("aria-pressed", String(chip.dataset.state === state));
  if (chip.dataset.state === state) chip.hidden = false; // the filter in the URL shows at once
}

// the drawer: a row's cells, a waterfall's attempts, its charges
const drawer = document.getElementById("drawer");
let returnFocus = null;

function field(label, value) {
  return value === undefined || value === null || value === "" ? null : [el("dt", {}, label), el("dd", {}, value)];
}

async function openDrawer(row) {
  if (!row) return;
  returnFocus = document.activeElement;
  const doc = await getJSON(api(`row/${idPath(runId)}?dataset=${encodeURIComponent(dataset)}&key=${encodeURIComponent(row.key)}`));
  document.getElementById("drawer-title").textContent = `Row ${doc.index + 1}: ${doc.key}`;
  const parts = [el("p", {}, stateCell(doc.status), doc.error ? el("span", { class: "error" }, ` ${doc.error}`) : null)];
  for (const [column, meta] of Object.entries(doc.meta)) {
    const block = el("section", { class: "cell-meta" }, el("h3", {}, column, " ", stateCell(meta.status)));
    block.append(el("dl", {}, ...[
      field("value", text(doc.values[column])), field("provider", meta.provider),
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
    parts.push(block);
  }
  if (doc.ledger.length) {
    parts.push(el("h3", {}, "Charges (ledger)"), el("table", { class: "table" },
      el("thead", {}, el("tr", {}, ...["Tool", "Credits", "Found", "Receipt"].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, ...doc.ledger.map((e) => el("tr", {}, el("td", {}, e.tool),
        el("td", { class: "num" }, credits(e.credits)), el("td", {}, e.found ? "yes" : "no"),
        el("td", { class: "mono receipt" }, e.receipt))))));
  }
  document.getElementById("drawer-body").replaceChildren(...parts);
  drawer.hidden = false;
  document.getElementById("drawer-close").focus();
}

function closeDrawer() {
  drawer.hidden = true;
  if (returnFocus) returnFocus.focus();
}
document.getElementById("drawer-close").addEventListener("click", closeDrawer);
drawer.addEventListener("keydown", (e) => { if (e.key === "Escape") closeDrawer(); });

// frames, for the benchmark's "worst gap between animation frames"
let lastFrame = performance.now();
probe.worstFrameGap = 0;
function frame(now) {
  probe.frames += 1;
  probe.worstFrameGap = Math.max(probe.worstFrameGap, now - lastFrame);
  lastFrame = now;
  requestAnimationFrame(frame);
}
requestAnimationFrame(frame);
probe.resetFrames = () => { probe.worstFrameGap = 0; lastFrame = performance.now(); };
