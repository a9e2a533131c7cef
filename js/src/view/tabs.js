/** A tab strip over pages: one page shown at a time; a page whose panel hides itself (nothing to show yet) has
 * its tab hidden too, and a page that shows itself for the first time while another is open gets a marked tab. */

import { h, listen } from "./dom.js";

/**
 * A page of the strip.
 * @typedef {{key: string, label: string, title: string, el: HTMLElement, announce?: boolean, onShow?: () => void}} Page
 */

/**
 * Build tabs over `pages` ([{key, label, title, el, announce}]); `el` is the panel, whose own `hidden` says whether it
 * has anything to show; `announce`: mark its tab when it first has something while another page is open; `onShow`:
 * called each time its page is chosen, once shown. `label` names the strip for assistive technology. Returns {el, select(key), selected(), destroy}.
 * @param {Page[]} pages
 * @param {string} label
 */
export function createTabs(pages, label) {
  /** @type {Map<string, HTMLButtonElement>} */
  const buttons = new Map();
  /** @type {Map<string, HTMLDivElement>} */
  const holders = new Map();
  for (const page of pages) {
    const id = `hw-tab-${page.key}-${Math.random().toString(36).slice(2, 8)}`;
    const button = h("button", {
      cls: "hw-tab",
      attrs: { type: "button", role: "tab", "data-tab": page.key, "aria-controls": id, title: page.title },
      text: page.label,
    });
    const holder = h("div", { cls: "hw-tab-page", attrs: { role: "tabpanel", id, "data-tab": page.key } }, [page.el]);
    buttons.set(page.key, button);
    holders.set(page.key, holder);
  }
  const strip = h("div", { cls: "hw-tabs", attrs: { role: "tablist", "aria-label": label } }, [...buttons.values()]);
  const el = h("div", { cls: "hw-pane" }, [strip, ...holders.values()]);
  let current = pages[0].key;

  /** @param {string} key */
  function available(key) {
    return !(/** @type {Page} */ (pages.find((p) => p.key === key)).el.hidden);
  }

  /** @param {string | null} key */
  function select(key) {
    if (key === null || !buttons.has(key) || !available(key)) return;
    current = key;
    el.setAttribute("data-active", key); // the pane's styles may follow its page (the graph wants room)
    for (const [k, button] of buttons) {
      const on = k === key;
      button.setAttribute("aria-selected", on ? "true" : "false");
      button.tabIndex = on ? 0 : -1;
      if (on) button.classList.remove("hw-tab-fresh");
      /** @type {HTMLDivElement} */ (holders.get(k)).hidden = !on;
    }
    pages.find((p) => p.key === key)?.onShow?.(); // after it is shown: it can measure itself
  }

  function sync() {
    // A panel that hides itself takes its tab along; the shown page falls back to the first when its panel goes.
    for (const page of pages) {
      const button = /** @type {HTMLButtonElement} */ (buttons.get(page.key));
      const was = !button.hidden;
      button.hidden = page.el.hidden;
      if (page.announce && !was && !button.hidden && page.key !== current) button.classList.add("hw-tab-fresh");
    }
    if (!available(current)) select(pages.find((p) => available(p.key))?.key ?? pages[0].key);
  }

  /** @param {KeyboardEvent} event */
  function onKey(event) {
    // Arrow keys move between the shown tabs, as in every tab strip.
    if (event.key !== "ArrowRight" && event.key !== "ArrowLeft") return;
    const shown = pages.filter((p) => available(p.key)).map((p) => p.key);
    const at = shown.indexOf(current);
    const next = shown[(at + (event.key === "ArrowRight" ? 1 : shown.length - 1)) % shown.length];
    select(next);
    /** @type {HTMLButtonElement} */ (buttons.get(next)).focus();
    event.preventDefault();
  }

  const observer =
    typeof MutationObserver === "function" ? new MutationObserver(sync) : { observe() {}, disconnect() {} };
  for (const page of pages) observer.observe(page.el, { attributes: true, attributeFilter: ["hidden"] });
  const offs = [
    listen(strip, "click", (event) => {
      const button = /** @type {Element} */ (event.target).closest?.("button.hw-tab");
      if (button) select(button.getAttribute("data-tab"));
    }),
    listen(strip, "keydown", onKey),
  ];
  for (const button of buttons.values()) button.hidden = false;
  sync();
  select(current);
  return {
    el,
    select,
    selected: () => current,
    destroy() {
      observer.disconnect();
      offs.forEach((off) => off());
    },
  };
}
