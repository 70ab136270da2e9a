// A menu of states under a button (a column's filter): one item per state, the current one
// checked. It takes the arrow keys, Enter and Escape (or Tab), closes on a click outside it,
// and gives the focus back to its button when an item is chosen or it is closed by a key.
import { el, STATES } from "./common.js";
import { stateWord } from "./cells.js";

let open = null; // { node, button }: at most one menu at a time

function close(focusBack) {
  if (!open) return;
  const { node, button } = open;
  open = null;
  node.remove();
  document.removeEventListener("mousedown", outside, true);
  if (focusBack) button.focus();
}

function outside(e) {
  if (open && !open.node.contains(e.target)) close(false);
}

function item(state, current, pick) {
  const icon = state ? el("span", { class: "state", "aria-hidden": "true" }, STATES[state].icon) : null;
  const node = el("button", {
    type: "button", role: "menuitemradio", "aria-checked": String(state === current),
    "data-state": state, class: state ? `state-${state}` : "",
  }, icon, state ? stateWord(state) : "any state");
  node.addEventListener("click", () => { close(true); pick(state); });
  return node;
}

function keys(e, items) {
  const at = items.indexOf(document.activeElement);
  if (e.key === "Escape" || e.key === "Tab") { e.preventDefault(); close(true); }
  else if (e.key === "ArrowDown") { e.preventDefault(); items[(at + 1) % items.length].focus(); }
  else if (e.key === "ArrowUp") { e.preventDefault(); items[(at - 1 + items.length) % items.length].focus(); }
}

/** Open the menu under `button`: `states` ("" for any), `current` checked; `pick(state)` on a
 * choice. `label` names the menu for screen readers, `title` heads it on screen. */
export function openStateMenu(button, label, title, states, current, pick) {
  close(false);
  const items = states.map((state) => item(state, current, pick));
  const node = el("div", { class: "col-menu", role: "menu", "aria-label": label },
    el("p", { class: "col-menu-title", "aria-hidden": "true" }, title), ...items);
  const box = button.getBoundingClientRect();
  node.style.top = `${box.bottom + 4}px`; // fixed, in the page: the grid's header would clip it
  node.style.left = `${Math.min(box.left, window.innerWidth - 220)}px`;
  document.body.append(node);
  open = { node, button };
  node.addEventListener("keydown", (e) => keys(e, items));
  document.addEventListener("mousedown", outside, true);
  (items.find((i) => i.getAttribute("aria-checked") === "true") || items[0]).focus();
}
