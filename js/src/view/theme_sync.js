/** Tells the kernel the page's theme (the `theme` traitlet), when the view renders and whenever the theme changes. */

import { sameTheme, pageTheme } from "../theme.js";
import { onThemeChange } from "./dom.js";

/**
 * The computed background behind `el`: the first ancestor's that is not transparent (the page's own, else white).
 * @param {Element} el
 */
function backgroundBehind(el) {
  for (let node = el.parentElement; node; node = node.parentElement) {
    const color = getComputedStyle(node).backgroundColor;
    if (color && color !== "transparent" && !/^rgba\(.*,\s*0\)$/.test(color)) return color;
  }
  return "rgb(255, 255, 255)";
}

/**
 * Write the page's theme into `model` from `root` (the widget's box) now and on each theme change.
 * @param {import("../widget_model.js").WidgetModel} model
 * @param {HTMLElement} root
 */
export function createThemeSync(model, root) {
  const report = () => {
    if (!root.isConnected) return;
    const style = getComputedStyle(root);
    const theme = pageTheme({
      jpThemeLight: document.body?.dataset.jpThemeLight,
      bodyClasses: [...(document.body?.classList ?? [])],
      background: style.backgroundColor,
      foreground: style.color,
      pageBackground: backgroundBehind(root),
    });
    if (sameTheme(theme, model.get("theme"))) return;
    model.set("theme", theme);
    model.save_changes();
  };
  const frame = requestAnimationFrame(report); // once `root` is in the page and its styles apply
  const stop = onThemeChange(report);
  return {
    destroy() {
      cancelAnimationFrame(frame);
      stop();
    },
  };
}
