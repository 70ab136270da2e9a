// A dataset's rows in AG Grid's Infinite Row Model: windows of rows fetched from the store,
// cells changed live through the run's event stream, chips that filter by state and a filter
// per column header (kept in the URL), sorting by a column, columns as wide as their values,
// an optional cost column, and a drawer with a row's cells, waterfall steps and charges.
// While a dataset runs, the rows not stored yet come as pending placeholders (web/grid.py).
import {
  CellStyleModule, ColumnApiModule, createGrid, EventApiModule, InfiniteRowModelModule,
  ModuleRegistry, RenderApiModule, RowApiModule, RowStyleModule, ScrollApiModule, themeQuartz,
  TooltipModule,
} from "./vendor/ag-grid.min.js";
import {
  cellContent, cellTooltip, chooseFields, ColumnWidths, funnelIcon, stateIcon, stateWord, summary,
} from "./cells.js";
import {
  api, badge, credits, el, follow, getJSON, idPath, num, STATES, styleNonce, toast,
} from "./common.js";
import { rowDrawer } from "./drawer.js";
import { openStateMenu } from "./menu.js";
import { BLOCK, windowURL } from "./window.js";

ModuleRegistry.registerModules([
  CellStyleModule, ColumnApiModule, EventApiModule, InfiniteRowModelModule, RenderApiModule,
  RowApiModule, RowStyleModule, ScrollApiModule, TooltipModule,
]);

const page = document.getElementById("grid-page");
const gridNode = document.getElementById("grid");
const runId = page.dataset.runId;
const dataset = page.dataset.dataset;
const columns = JSON.parse(page.dataset.columns); // grows: see addColumns
const computed = new Set(JSON.parse(page.dataset.computed)); // the others are input fields
const params = new URLSearchParams(location.search);
// What the rows are filtered and sorted by, as the URL says (a link shows the same rows).
const view = {
  state: params.get("state") || "",
  column: params.get("column") || "", // with `state`: only this column's cells count
  sort: params.get("sort") || "",
  desc: params.get("desc") === "1",
  cost: params.get("cost") === "1",
};
// The states a cell can be in, for a column's filter menu (a row's `waiting` is not a cell's).
const CELL_STATES = ["queued", "running", "completed", "cached", "not_found", "skipped", "failed"];
if (!CELL_STATES.includes(view.state)) view.column = ""; // a column scopes a cell's state only

// What tests and the benchmark read: when rows first showed, which seq is applied.
const probe = (window.playlineGrid = {
  firstRowsAt: null, appliedSeq: 0, changesApplied: 0, messages: 0, reloads: 0,
  streamSeq: 0, frames: 0, widthChanges: 0,
});

// nested results: the fields each column's objects are shown by, as its with_column named
// them (fields=), else chosen from the first rows that hold some
const fieldsOf = new Map(Object.entries(JSON.parse(page.dataset.fields)));
const FONT_PX = 14; // the grid's text size: the theme's, and the one widths are measured in
const widths = new ColumnWidths(gridNode, FONT_PX);
const userSized = new Set(); // columns the user resized (their ids): their width is theirs

// AG Grid's column id is the name when that is safe, else generated ("_c0", "_c1", ...): a
// field named "" (AG Grid would call it "0"), "__proto__" or "toString" (Object properties)
// or "_index" (the grid's own) must still be a column. The name is the header and the key of
// a row's values (read by valueGetter, never by AG Grid's `field` path).
const colIds = new Map(); // name -> id
const namesById = new Map(); // id -> name
// A row's value or cell state for a column: its own key only ("toString" is no inherited one).
function own(obj, name) {
  return Object.hasOwn(obj, name) ? obj[name] : undefined;
}
function colIdOf(name) {
  if (!colIds.has(name)) {
    const safe = /^[^_\d.]/.test(name) && !(name in Object.prototype);
    const id = safe ? name : `_c${colIds.size}`;
    colIds.set(name, id);
    namesById.set(id, name);
  }
  return colIds.get(name);
}

function chosenFields(rows) {
  for (const name of columns) {
    if (fieldsOf.has(name)) continue;
    const fields = chooseFields(name, rows);
    if (!fields) continue;
    fieldsOf.set(name, fields);
    for (const hint of document.querySelectorAll(`.col-head[data-column="${CSS.escape(name)}"] .col-hint`)) {
      hint.textContent = fields.join(" · ");
    }
    widths.noteHeader(name, `${name} ${fields.join(" · ")}`, computed.has(name));
  }
}

function renderCell(p) {
  const row = p.data;
  if (!row) return el("span", { class: "loading" }, "…");
  const name = namesById.get(p.colDef.colId);
  // a row not stored yet: its computed cells are pending, its input fields not known here
  const status = own(row.cells, name) || (row.pending && computed.has(name) ? "pending" : undefined);
  return cellContent(own(row.values, name), status, fieldsOf.get(name));
}

function renderRowState(p) {
  return p.data ? stateIcon(p.data.status) : "";
}

function renderCost(p) {
  const row = p.data;
  if (!row || row.pending || row.cost === undefined) return "";
  return row.usd ? `${credits(row.cost)} + $${num(row.usd, 4)}` : credits(row.cost);
}

// A column header: its name, the fields its nested results are shown by, and (a computed
// column's) a button that opens its state filter; its click does not sort: it stops there.
class ColumnHead {
  init(p) {
    const name = namesById.get(p.column.getColId());
    this.gui = el("span", { class: "col-head", "data-column": name },
      el("span", { class: "col-name" }, p.displayName),
      el("span", { class: "col-hint" }, (fieldsOf.get(name) || []).join(" · ")));
    if (!computed.has(name)) return;
    const button = el("button", {
      type: "button", class: "col-filter", "data-column": name, "aria-haspopup": "menu",
      "aria-label": `Filter rows by the state of ${name}`, title: `Filter by ${name}'s state`,
    }, funnelIcon());
    button.addEventListener("click", (e) => { e.stopPropagation(); openMenu(name, button); });
    this.gui.append(button);
    markFilter(button);
    // The header's name is the column's (a screen reader says it on each cell), not its
    // content's, which holds the button's label too.
    requestAnimationFrame(() => this.gui.closest(".ag-header-cell")?.setAttribute("aria-label", name));
  }
  getGui() { return this.gui; }
  refresh() { return false; }
}

// Keys on a computed column's header: Tab from the header cell reaches its filter button,
// Alt+ArrowDown opens its menu (as a menu button does), Enter and Space on the button are
// the button's; the other keys are the grid's (arrows, Enter to sort).
function headerKey(event, name) {
  if (!computed.has(name) || event.type !== "keydown") return false;
  const cell = event.target.closest && event.target.closest(".ag-header-cell");
  const button = cell && cell.querySelector(".col-filter");
  if (!button) return false;
  if (event.key === "Tab" && !event.shiftKey && event.target === cell) {
    event.preventDefault();
    button.focus();
    return true;
  }
  if (event.key === "ArrowDown" && event.altKey) {
    event.preventDefault();
    openMenu(name, button);
    return true;
  }
  return event.target === button && (event.key === "Enter" || event.key === " ");
}

function valueColumn(name) {
  widths.noteHeader(name, `${name} ${(fieldsOf.get(name) || []).join(" · ")}`, computed.has(name));
  return {
    // sorting by "" cannot be said in the URL (`sort=` means unsorted)
    headerName: name, colId: colIdOf(name), sortable: name !== "",
    width: widths.wanted.get(name),
    headerComponentParams: { innerHeaderComponent: ColumnHead },
    suppressHeaderKeyboardEvent: (p) => headerKey(p.event, name),
    initialSort: view.sort === name ? (view.desc ? "desc" : "asc") : null,
    valueGetter: (p) => (p.data ? own(p.data.values, name) : undefined),
    cellRenderer: renderCell,
    cellClass: (p) => `state-${(p.data && own(p.data.cells, name)) || "none"}`,
    tooltipValueGetter: (p) => (p.data ? cellTooltip(own(p.data.values, name), own(p.data.cells, name)) : undefined),
  };
}

// The columns a window names (input fields first), with those the page knew; true if new.
function mergeColumns(names) {
  if (names.every((name) => columns.includes(name))) return false;
  columns.splice(0, columns.length, ...names, ...columns.filter((name) => !names.includes(name)));
  return true;
}

// Rows' texts, measured for their columns' widths.
function noteRows(rows) {
  for (const name of columns) {
    const fields = fieldsOf.get(name);
    const texts = rows.map((r) => summary(own(r.values, name), fields) || stateWord(own(r.cells, name) || ""));
    widths.noteTexts(name, texts, computed.has(name));
  }
}

let columnDefs = [
  {
    // room for 7 digits: a row number of a million-row dataset is not cut ("9…")
    headerName: "#", colId: "_index", width: 88, sortable: false,
    valueGetter: (p) => (p.data && p.data.index !== null ? p.data.index + 1 : ""),
    cellClass: "index",
  },
  {
    headerName: "row", colId: "_status", width: 64, sortable: false,
    cellRenderer: renderRowState,
    cellClass: (p) => `row-state state-${p.data ? p.data.status : "pending"}`,
    tooltipValueGetter: (p) => (p.data ? [stateWord(p.data.status), p.data.error].filter(Boolean).join(": ") : undefined),
  },
  {
    headerName: "cost", colId: "_cost", width: 96, sortable: false, hide: !view.cost,
    headerTooltip: "Credits the ledger holds for the row, over every attempt",
    cellRenderer: renderCost, cellClass: "num",
  },
  ...columns.map(valueColumn),
];

// A page opened before a row was stored knows only the computed columns: the input fields
// come with the first stored rows (a window at offset 0 names the columns).
function addColumns(names) {
  if (!mergeColumns(names)) return;
  const fixed = columnDefs.filter((def) => !namesById.has(def.colId));
  const byName = new Map(columnDefs.map((def) => [namesById.get(def.colId), def]));
  columnDefs = [...fixed, ...columns.map((name) => byName.get(name) || valueColumn(name))];
  grid.setGridOption("columnDefs", columnDefs);
}

let streamStarted = false;
let total = null; // rows the grid lists
let stored = null; // of them, stored (the others are pending placeholders)
let expected = null; // rows the running dataset's input holds, when known

async function fetchWindow(offset, limit) {
  const url = windowURL(runId, dataset, offset, limit, view);
  const early = window.playlineFirstWindow;
  window.playlineFirstWindow = null;
  if (early && early.url === url) {
    const doc = await early.doc;
    if (doc) return doc;
  }
  return getJSON(url);
}

function followSort(sortModel) {
  const wanted = sortModel ? namesById.get(sortModel.colId) || "" : "";
  const wantedDesc = sortModel ? sortModel.sort === "desc" : false;
  if (wanted !== view.sort || wantedDesc !== view.desc) {
    view.sort = wanted; view.desc = wantedDesc;
    keepURL();
  }
}

const datasource = {
  getRows: async (p) => {
    followSort(p.sortModel && p.sortModel[0]);
    try {
      const doc = await fetchWindow(p.startRow, p.endRow - p.startRow);
      total = doc.total; stored = doc.stored; expected = doc.expected;
      if (doc.columns) addColumns(doc.columns);
      chosenFields(doc.rows);
      // before the rows are drawn: they are drawn once, at their widths (the grid, made while
      // the first window was on its way, holds no row yet: only its header is laid out again)
      fitColumns(doc.rows);
      p.successCallback(doc.rows, doc.total);
      checkArrivals();
      shown();
      if (probe.firstRowsAt === null && doc.rows.length) {
        requestAnimationFrame(() => { probe.firstRowsAt = performance.now(); });
      }
      if (!streamStarted) { streamStarted = true; startStream(doc.seq); }
    } catch (e) {
      p.failCallback();
      toast(e.message, "error"); // e.g. a URL that names no column of the dataset
    }
  },
};

const grid = createGrid(gridNode, {
  // The page's own fonts: the theme's default would come from a web font service.
  theme: themeQuartz.withParams({
    fontFamily: "inherit", headerFontFamily: "inherit", cellFontFamily: "inherit",
    fontSize: FONT_PX, headerFontSize: FONT_PX,
  }),
  styleNonce,
  rowModelType: "infinite",
  datasource,
  cacheBlockSize: BLOCK,
  maxBlocksInCache: 20,
  getRowId: (p) => p.data.key,
  rowClassRules: { "row-pending": (p) => Boolean(p.data && p.data.pending) }, // re-read on new data
  columnDefs,
  defaultColDef: { resizable: true, suppressHeaderMenuButton: true },
  ensureDomOrder: true,
  rowHeight: 34,
  tooltipShowDelay: 400,
  onCellClicked: (e) => openDrawer(e.data),
  onCellKeyDown: (e) => {
    if (e.event && e.event.key === "Enter") openDrawer(e.data);
  },
  onColumnResized: (e) => {
    if (e.source === "uiColumnResized" && e.column) userSized.add(e.column.getColId());
  },
});
probe.api = grid;

// Column widths: each column as wide as its widest value seen (web/static/cells.js), grown
// with each window of rows, which redraws its rows anyway. Laying the columns out again takes
// a long frame (100 ms on a 30-column grid), so live changes never do it: while a run adds
// rows, the windows come again as they are stored (and once more when the run ends).
function fitColumns(rows) {
  noteRows(rows);
  applyWidths();
}

function applyWidths() {
  const state = [];
  for (const [name, width] of widths.wanted) {
    const colId = colIdOf(name);
    const column = grid.getColumn(colId);
    if (column && !userSized.has(colId) && width > column.getActualWidth()) state.push({ colId, width });
  }
  if (state.length) {
    grid.applyColumnState({ state });
    probe.widthChanges += 1;
  }
}

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
  if (view.cost && Object.values(rows).some((c) => c.status !== undefined)) refreshSoon(); // a cost changed
  if (!scheduled) { scheduled = true; requestAnimationFrame(applyPending); }
}

// Rows the stream reported done that the grid does not list yet (a pending placeholder holds
// their place): a row reaches the store up to a second after its event, so the windows are
// asked for again until it comes, for at most CATCH_UP_MS (a row past the cached blocks never
// shows here). Only while the dataset has rows not stored.
const CATCH_UP_MS = 5000;
const arriving = new Map(); // key -> when the stream reported it

function noteArrivals(rows) {
  if (!(total > stored)) return;
  const now = performance.now();
  for (const key of Object.keys(rows)) if (!grid.getRowNode(key)) arriving.set(key, now);
  if (arriving.size) refreshSoon();
}

function checkArrivals() {
  const now = performance.now();
  for (const [key, at] of arriving) {
    if (grid.getRowNode(key) || now - at > CATCH_UP_MS) arriving.delete(key);
  }
  if (arriving.size) refreshSoon();
}

let lastRows = null;
let lastStatus = null;
let refreshTimer = null;
function refreshSoon() {
  if (refreshTimer) return;
  refreshTimer = setTimeout(() => { refreshTimer = null; grid.refreshInfiniteCache(); }, 500);
}

// The rows a summary's counts say the grid lists: null when only the window can say (a
// column's filter), the stored rows or, while the dataset runs, the rows its input holds.
function rowsToList(counts) {
  if (view.column) return null;
  if (view.state) return counts.rows_with[view.state] || 0;
  return Math.max(counts.rows, expected || 0);
}

function summaryCame(s) {
  badge(document.getElementById("status"), s.status);
  if (lastStatus !== null && s.status !== lastStatus) refreshSoon(); // an end: no more pending
  lastStatus = s.status;
  if (!s.counts) return;
  chips(s.counts);
  const rows = view.state ? s.counts.rows_with[view.state] || 0 : s.counts.rows;
  if (lastRows !== null && rows !== lastRows) {
    const listed = rowsToList(s.counts);
    if (listed === null) {
      refreshSoon();
    } else if (listed !== total) {
      total = listed;
      grid.setRowCount(listed, true);
      refreshSoon();
    } else if (!view.state && rows !== stored) {
      refreshSoon(); // stored rows take their placeholders' places
    }
  }
  lastRows = rows;
}

function startStream(seq) {
  follow(api(`stream/${idPath(runId)}?dataset=${encodeURIComponent(dataset)}&after=${seq}`), {
    changes: (d) => {
      probe.messages += 1;
      probe.streamSeq = d.seq;
      noteArrivals(d.rows);
      queue(d.rows, d.seq);
    },
    reload: (d) => {
      probe.reloads += 1;
      probe.streamSeq = d.seq;
      pendingSeq = d.seq;
      grid.refreshInfiniteCache();
      requestAnimationFrame(() => { probe.appliedSeq = d.seq; });
    },
    summary: summaryCame,
  });
}

// chips: counts per state (a cell of any column); the chosen one filters rows
function chips(counts) {
  document.getElementById("count-all").textContent = num(Math.max(counts.rows, expected || 0));
  for (const chip of document.querySelectorAll(".chip[data-state]")) {
    const s = chip.dataset.state;
    if (!s) continue;
    const n = counts.rows_with[s] || 0;
    chip.querySelector(".count").textContent = num(n);
    chip.hidden = n === 0 && s !== view.state;
    chip.querySelector(".icon").textContent = STATES[s]?.icon || "";
  }
}

function keepURL() {
  const q = new URLSearchParams({ dataset });
  if (view.state) q.set("state", view.state);
  if (view.state && view.column) q.set("column", view.column);
  if (view.sort) { q.set("sort", view.sort); if (view.desc) q.set("desc", "1"); }
  if (view.cost) q.set("cost", "1");
  history.replaceState(null, "", `?${q}`);
}

function shown() {
  let what = `${num(total)} rows`;
  if (view.column) what = `${num(total)} rows whose ${view.column} is ${stateWord(view.state)}`;
  else if (view.state) what = `${num(total)} rows with a cell ${stateWord(view.state)}`;
  else if (stored !== null && total > stored) what += `, ${num(total - stored)} of them pending`;
  document.getElementById("shown").textContent = what + (view.sort ? `, by ${view.sort}${view.desc ? " (descending)" : ""}` : "");
}

// Show other rows: a state of any column (a chip) or of one column (its header's menu).
function filterBy(state, column) {
  view.state = state;
  view.column = state ? column : "";
  showFilter();
  keepURL();
  lastRows = null;
  grid.setGridOption("datasource", datasource);
}

// The chips, the column's chip and the headers' buttons say which filter is on.
function showFilter() {
  for (const c of document.querySelectorAll(".chip[data-state]")) {
    c.setAttribute("aria-pressed", String(!view.column && c.dataset.state === view.state));
    if (c.dataset.state === view.state && view.state) c.hidden = false;
  }
  const scoped = document.getElementById("column-chip");
  scoped.hidden = !view.column;
  scoped.querySelector(".what").textContent = view.column ? `${view.column}: ${stateWord(view.state)}` : "";
  for (const button of document.querySelectorAll(".col-filter")) markFilter(button);
}

for (const chip of document.querySelectorAll(".chip[data-state]")) {
  chip.addEventListener("click", () => filterBy(chip.dataset.state, ""));
}
document.getElementById("column-chip").addEventListener("click", () => filterBy("", ""));
showFilter(); // the URL's filter shows at once

// A column's filter button says when its filter is on: filled, and in its name.
function markFilter(button) {
  const name = button.dataset.column;
  const on = name === view.column;
  button.classList.toggle("on", on);
  const now = on ? ` (now: ${stateWord(view.state)})` : "";
  button.setAttribute("aria-label", `Filter rows by the state of ${name}${now}`);
}

// The menu under a column's filter button: any state, or one a cell can be in (menu.js).
function openMenu(name, button) {
  const current = view.column === name ? view.state : "";
  openStateMenu(button, `Show the rows whose ${name} is`, `${name} is…`, ["", ...CELL_STATES], current,
    (state) => filterBy(state, name));
}

// the cost column: hidden unless asked for (its window reads the run's ledger)
const costToggle = document.getElementById("show-cost");
costToggle.checked = view.cost;
costToggle.addEventListener("change", () => {
  view.cost = costToggle.checked;
  grid.setColumnsVisible(["_cost"], view.cost);
  keepURL();
  grid.refreshInfiniteCache();
});

// the drawer: a row's cells, a waterfall's attempts, its charges (drawer.js)
const openDrawer = rowDrawer(runId, dataset);

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
