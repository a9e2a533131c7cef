import assert from "node:assert/strict";
import { test } from "node:test";
import { composite, contrast, pageTheme, parseColor, sameTheme, toHex } from "../src/theme.js";

test("parseColor reads what getComputedStyle writes, and hex", () => {
  assert.deepEqual(parseColor("rgb(17, 17, 17)"), [17, 17, 17, 1]);
  assert.deepEqual(parseColor("rgba(0, 0, 0, 0.87)"), [0, 0, 0, 0.87]);
  assert.deepEqual(parseColor("#fff"), [255, 255, 255, 1]);
  assert.deepEqual(parseColor("#1e1e1e"), [30, 30, 30, 1]);
  assert.deepEqual(parseColor("color(srgb 1 0.2 0 / 0.5)"), [255, 51, 0, 0.5]);
  assert.equal(parseColor("var(--jp-layout-color1)"), null);
  assert.equal(parseColor(""), null);
});

test("a translucent colour is composited on what is under it", () => {
  assert.equal(toHex(composite([0, 0, 0, 0.87], [255, 255, 255])), "#212121");
  assert.equal(toHex(composite([255, 255, 255, 0], [17, 17, 17])), "#111111");
});

test("JupyterLab's marker names the theme; the colours come from the widget's computed style", () => {
  const dark = pageTheme({
    jpThemeLight: "false",
    background: "rgb(17, 17, 17)",
    foreground: "rgba(255, 255, 255, 1)",
    pageBackground: "rgb(17, 17, 17)",
  });
  assert.deepEqual(dark, { name: "dark", background: "#111111", foreground: "#ffffff" });
  const light = pageTheme({ jpThemeLight: "true", background: "rgb(255, 255, 255)", foreground: "rgba(0, 0, 0, 0.87)" });
  assert.deepEqual(light, { name: "light", background: "#ffffff", foreground: "#212121" });
});

test("without a marker, VS Code's body class or the background's luminance names it", () => {
  const vscode = pageTheme({ bodyClasses: ["vscode-dark"], background: "rgb(30, 30, 30)", foreground: "rgb(204, 204, 204)" });
  assert.equal(vscode.name, "dark");
  // a transparent widget on a dark page (Colab): the page's colour, and dark
  const colab = pageTheme({ background: "rgba(0, 0, 0, 0)", foreground: "rgb(227, 227, 227)", pageBackground: "rgb(56, 56, 56)" });
  assert.deepEqual(colab, { name: "dark", background: "#383838", foreground: "#e3e3e3" });
});

test("a foreground that does not read on the background is replaced by the theme's own", () => {
  const odd = pageTheme({ jpThemeLight: "false", background: "rgb(17, 17, 17)", foreground: "rgb(34, 34, 34)" });
  assert.equal(odd.foreground, "#e7e7e7");
  assert.ok(contrast([231, 231, 231], [17, 17, 17]) >= 4.5);
});

test("sameTheme compares the three fields", () => {
  const a = { name: "dark", background: "#111111", foreground: "#ffffff" };
  assert.ok(sameTheme(a, { ...a }));
  assert.ok(!sameTheme(a, { ...a, background: "#000000" }));
  assert.ok(!sameTheme(a, undefined));
});
