// Starts fetching the grid's first window while the grid's code loads (a small module that
// runs first): the first rows show sooner. grid.js takes it when it asks for the same window.
import { firstWindowURL } from "./window.js";

const page = document.getElementById("grid-page");
const url = firstWindowURL(page.dataset.runId, page.dataset.dataset, new URLSearchParams(location.search));
window.playlineFirstWindow = { url, doc: fetch(url, { headers: { Accept: "application/json" } }).then((r) => (r.ok ? r.json() : null)) };
