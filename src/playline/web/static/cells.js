// How the grid shows one cell: its value first, then its state as an icon with a colour (the
// word for screen readers, and in the cell's tooltip), nested results as a few of their fields,
// and each column as wide as its values. Kept apart from grid.js, which wires the grid.
import { el, STATES, text } from "./common.js";

// The fields a nested result is shown by: a label-like field first, then those readers scan
// for; the rest in their own order. Ids and links are left to the drawer.
const PREFERRED = ["name", "full_name", "display_name", "title", "label", "status", "industry",
  "type", "category", "size", "country"];
const FIELDS_SHOWN = 2;
const SKIPPED = /(^id$|_id$|^uuid$|url$|^href$)/i;

/** A funnel, drawn: no font on the machine need have the glyph. */
export function funnelIcon() {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 12 12");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("class", "funnel");
  const path = document.createElementNS(ns, "path");
  path.setAttribute("d", "M1 1.5h10L7.2 6.2V10.5L4.8 9.3V6.2z");
  svg.append(path);
  return svg;
}

export function stateWord(status) {
  return STATES[status]?.text || status;
}

/** A cell's state as an icon: its colour comes from the cell's `state-*` class; its word is
 * its accessible name, since the icon alone says nothing to a screen reader. */
export function stateIcon(status) {
  const s = STATES[status] || { icon: "?", text: status };
  return el("span", { class: "state state-icon", role: "img", "aria-label": s.text }, s.icon);
}

// Label-like fields first, the others in their order (the sorts are stable).
function rank(field) {
  const at = PREFERRED.indexOf(field);
  return at === -1 ? PREFERRED.length : at;
}

function isScalar(value) {
  return value !== null && value !== "" && ["string", "number", "boolean"].includes(typeof value);
}

function isRecord(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/** The fields to show a column's nested results by, chosen once from the rows first loaded:
 * scalar fields, not those that repeat another column of most rows (the demo's
 * `company.industry` beside its `industry` column), label-like ones first. */
export function chooseFields(column, rows) {
  const seen = new Map(); // field -> { n: rows holding it, repeats: of them, another column's }
  let order = 0;
  for (const row of rows) {
    const value = row.values?.[column];
    if (!isRecord(value)) continue;
    for (const [field, x] of Object.entries(value)) {
      if (!isScalar(x) || SKIPPED.test(field)) continue;
      const s = seen.get(field) || { n: 0, repeats: 0, order: order++ };
      s.n += 1;
      if (Object.entries(row.values).some(([c, y]) => c !== column && y === x)) s.repeats += 1;
      seen.set(field, s);
    }
  }
  if (!seen.size) return null;
  const fresh = [...seen].filter(([, s]) => s.repeats * 2 < s.n);
  const pool = fresh.length ? fresh : [...seen];
  pool.sort(([a, sa], [b, sb]) => rank(a) - rank(b) || sa.order - sb.order);
  return pool.slice(0, FIELDS_SHOWN).map(([field]) => field);
}

/** A value as one line: a nested result by its chosen fields (`AlgalkinHQ · 51-200`), a list
 * by its first item and how many more; the whole value is in the row's drawer. */
export function summary(value, fields) {
  if (value === null || value === undefined) return "";
  if (Array.isArray(value)) {
    if (!value.length) return "";
    const first = summary(value[0], fields);
    return value.length === 1 ? first : `${first} (+${value.length - 1})`;
  }
  if (!isRecord(value)) return String(value);
  let picked = (fields || []).filter((f) => isScalar(value[f]));
  if (!picked.length) { // no fields chosen for its column (the drawer), or none it holds
    picked = Object.keys(value).filter((f) => isScalar(value[f]) && !SKIPPED.test(f));
    picked.sort((a, b) => rank(a) - rank(b));
  }
  if (!picked.length) return `${Object.keys(value).length} fields`;
  return picked.slice(0, FIELDS_SHOWN).map((f) => String(value[f])).join(" · ");
}

// The states whose empty cell says why it is empty (a done cell may hold nothing: a null).
const SAID_WHEN_EMPTY = new Set(["pending", "queued", "running", "waiting", "not_found", "skipped", "failed"]);

/** A computed cell: the value, then the state's icon; a cell with no value because of its
 * state shows the state's word in its place (muted), so a miss reads as one. */
export function cellContent(value, status, fields) {
  const shown = summary(value, fields);
  if (!status) return el("span", { class: "value" }, shown);
  if (shown === "" && SAID_WHEN_EMPTY.has(status)) {
    return el("span", { class: "cell-in" },
      el("span", { class: "value none" }, stateWord(status)), stateIcon(status));
  }
  return el("span", { class: "cell-in" }, el("span", { class: "value" }, shown), stateIcon(status));
}

/** A cell's tooltip: its state and its whole value (a nested result as JSON). */
export function cellTooltip(value, status) {
  const whole = text(value);
  if (!status) return whole || undefined;
  return whole ? `${stateWord(status)}: ${whole}` : stateWord(status);
}

/** A nested value in the drawer, expandable: each field on its line, nested ones inside. */
export function valueView(value, depth = 0) {
  if (Array.isArray(value) && depth < 4) {
    return el("details", { open: depth === 0 },
      el("summary", {}, `${value.length} item${value.length === 1 ? "" : "s"}`),
      el("ol", { class: "nested" }, ...value.map((v) => el("li", {}, valueView(v, depth + 1)))));
  }
  if (isRecord(value) && depth < 4) {
    return el("details", { open: depth === 0 },
      el("summary", {}, summary(value, null) || "fields"),
      el("dl", { class: "nested" }, ...Object.entries(value).flatMap(([k, v]) =>
        [el("dt", {}, k), el("dd", {}, valueView(v, depth + 1))])));
  }
  return text(value);
}

// Column widths from the values: text measured with the cells' font on a canvas (no layout),
// kept between MIN_WIDTH and MAX_WIDTH, grown as longer values come, never shrunk (a column
// that narrows while read is worse than one a little wide).
export const MIN_WIDTH = 64;
export const MAX_WIDTH = 460;
const ICON = 22; // the state icon and the gap before it
const HEADER_EXTRA = 50; // a header's side padding and its sort arrow
const FILTER_BUTTON = 22; // a computed column's filter button and the gap before it
const STEP = 12;
const MEASURED = 6; // the longest texts of a window measured per column

export class ColumnWidths {
  /** `fontSize`: the theme's, px (the measures before the grid draws use it). */
  constructor(gridNode, fontSize) {
    this.gridNode = gridNode;
    this.fontSize = fontSize;
    this.context = document.createElement("canvas").getContext("2d");
    this.wanted = new Map(); // column -> the widest content seen, px
    this.fonts = new Map(); // selector -> the font of a rendered node (read once: no reflows)
    this.padding = null;
  }

  // The font of a rendered node (the theme's), read once one exists: getComputedStyle after
  // the grid changed makes the browser recompute styles, too dear for every cell change.
  fontOf(selector, fallbackWeight) {
    const known = this.fonts.get(selector);
    if (known) return known;
    const node = this.gridNode.querySelector(selector);
    const style = getComputedStyle(node || this.gridNode);
    const font = node
      ? `${style.fontWeight} ${style.fontSize} ${style.fontFamily}`
      : `${fallbackWeight} ${this.fontSize}px ${style.fontFamily}`; // before the grid draws
    if (node) {
      this.fonts.set(selector, font);
      if (selector === ".ag-cell") {
        this.padding = parseFloat(style.paddingLeft) + parseFloat(style.paddingRight) + 2;
      }
    }
    return font;
  }

  measure(textValue, font) {
    if (this.context.font !== font) this.context.font = font;
    return this.context.measureText(textValue).width;
  }

  /** Note a header's width: its name and hint, with room for the sort arrow (and the
   * filter button, `withFilter`). */
  noteHeader(column, label, withFilter) {
    const text = this.measure(label, this.fontOf(".ag-header-cell-text", 600));
    this.grow(column, text + HEADER_EXTRA + (withFilter ? FILTER_BUTTON : 0));
  }

  /** Note cells' texts (with a state icon when `withIcon`); true when the column grew. Only
   * the longest few are measured: the widest text is one of them but for freak fonts. */
  noteTexts(column, texts, withIcon) {
    const font = this.fontOf(".ag-cell", 400);
    const longest = texts.length > MEASURED ? [...texts].sort((a, b) => b.length - a.length) : texts;
    let widest = 0;
    for (const t of longest.slice(0, MEASURED)) if (t) widest = Math.max(widest, this.measure(t, font));
    return widest > 0 && this.grow(column, widest + (withIcon ? ICON : 0) + (this.padding ?? 34));
  }

  // Widths in steps of STEP px: values a character longer than the last do not each make the
  // grid lay its columns out again.
  grow(column, width) {
    const clamped = Math.min(MAX_WIDTH, Math.max(MIN_WIDTH, Math.ceil(width / STEP) * STEP));
    if (clamped <= (this.wanted.get(column) || 0)) return false;
    this.wanted.set(column, clamped);
    return true;
  }
}
