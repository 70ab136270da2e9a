// The URL of a window of rows: shared by prefetch.js and grid.js so they ask alike.
import { idPath } from "./common.js";

export const BLOCK = 100;

/** `view`: what the rows are filtered and sorted by ({state, column, sort, desc, cost}). */
export function windowURL(runId, dataset, offset, limit, view) {
  const q = new URLSearchParams({ dataset, offset, limit });
  if (view.state) q.set("state", view.state);
  if (view.state && view.column) q.set("column", view.column);
  if (view.sort) { q.set("sort", view.sort); if (view.desc) q.set("desc", "1"); }
  if (view.cost) q.set("cost", "1");
  return `/api/rows/${idPath(runId)}?${q}`;
}

export function firstWindowURL(runId, dataset, params) {
  return windowURL(runId, dataset, 0, BLOCK, {
    state: params.get("state") || "", column: params.get("column") || "",
    sort: params.get("sort") || "", desc: params.get("desc") === "1", cost: params.get("cost") === "1",
  });
}
