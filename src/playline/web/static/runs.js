// The runs page: newest first, filtered by status and play (kept in the URL), live.
import { api, badge, credits, duration, el, follow, getJSON, idPath, num, when } from "./common.js";

const params = new URLSearchParams(location.search);
const statusSelect = document.getElementById("f-status");
const playSelect = document.getElementById("f-play");
statusSelect.value = params.get("status") || "";
let stream = null;

function render(runs) {
  const body = document.querySelector("#runs tbody");
  const now = Date.now() / 1000;
  body.replaceChildren(
    ...runs.map((r) => {
      const status = el("span");
      badge(status, r.status);
      const live = r.status === "running" ? now - r.created_at : r.duration;
      return el(
        "tr",
        { "data-run-id": r.run_id },
        el("td", {}, el("a", { href: `/run/${idPath(r.run_id)}`, class: "mono" }, r.run_id)),
        el("td", {}, r.play),
        el("td", {}, status),
        el("td", { class: "num" }, num(r.rows)),
        el("td", { class: "num" }, num(r.rows_failed)),
        el("td", { class: "num" }, num(r.rows_reused)),
        el("td", { class: "num" }, credits(r.credits) + (r.usd ? ` + $${num(r.usd, 4)}` : "")),
        el("td", {}, when(r.created_at)),
        el("td", { class: "num" }, duration(live)),
      );
    }),
  );
  document.getElementById("empty").hidden = runs.length > 0;
}

function query() {
  const q = new URLSearchParams();
  if (statusSelect.value) q.set("status", statusSelect.value);
  if (playSelect.value) q.set("play", playSelect.value);
  return q.toString();
}

async function load() {
  const q = query();
  history.replaceState(null, "", q ? `?${q}` : location.pathname);
  const doc = await getJSON(api(`runs?${q}`));
  const wanted = params.get("play") || playSelect.value;
  playSelect.replaceChildren(
    el("option", { value: "" }, "any"),
    ...doc.plays.map((p) => el("option", { value: p }, p)),
  );
  playSelect.value = wanted || "";
  render(doc.runs);
  if (stream) stream.close();
  stream = follow(api(`stream/runs?${q}`), { runs: (d) => render(d.runs) });
}

statusSelect.addEventListener("change", () => { params.delete("status"); load(); });
playSelect.addEventListener("change", () => { params.delete("play"); load(); });
load();
