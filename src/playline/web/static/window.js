// The URL of a window of rows: shared by prefetch.js and grid.js so they ask alike.
import { idPath } from "./common.js";

export const BLOCK = 100;

export function windowURL(runId, dataset, offset, limit, state, sort, desc) {
  const q = new URLSearchParams({ dataset, offset, limit });
  if (state) q.set("state", state);
  if (sort) { q.set("sort", sort); if (desc) q.set("desc", "1"); }
  return `/api/rows/${idPath(runId)}?${q}`;
}

export function firstWindowURL(runId, dataset, params) {
  return windowURL(runId, dataset, 0, BLOCK, params.get("state") || "", params.get("sort") || "",
    params.get("desc") === "1");
}
