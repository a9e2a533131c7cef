/**
 * Bundle the widget, minified with a source map: the layout engine first (the only module with dagre) to a string,
 * then src/index.js with that string inlined. The worker runs that string, and the page imports the same string
 * where no worker can start, so dagre is carried once.
 */

import { build } from "esbuild";
import { fileURLToPath } from "node:url";

const here = (path) => fileURLToPath(new URL(path, import.meta.url));
const common = { bundle: true, platform: "browser", target: "es2020", logLevel: "warning", minify: true };

/** The layout engine as one ESM source text (src/graph/layout_engine.js with dagre). */
export async function buildEngine() {
  const result = await build({ ...common, entryPoints: [here("src/graph/layout_engine.js")], format: "esm", write: false });
  return result.outputFiles[0].text;
}

/**
 * The widget: hookwidgets/static/widget.js (+ .css), each with its map beside it (anywidget imports the bundle from a
 * Blob URL, so the map is not fetched by the page: it is shipped for DevTools and for reading stack traces).
 * Returns esbuild's result; `write: false` keeps the files in memory (result.outputFiles).
 */
export async function buildWidget({ write = true } = {}) {
  const result = await build({
    ...common,
    entryPoints: [here("src/index.js")],
    format: "esm",
    outfile: here("../hookwidgets/static/widget.js"),
    sourcemap: "linked",
    sourcesContent: true, // the wheel ships no js/src: the map carries the sources
    metafile: true,
    write,
    define: { __HW_LAYOUT_ENGINE__: JSON.stringify(await buildEngine()) },
  });
  const dagre = Object.keys(result.metafile.inputs).filter((path) => path.includes("@dagrejs"));
  if (dagre.length > 0) {
    throw new Error(`dagre reached the widget bundle outside the layout engine (${dagre[0]}): import the layout from layout_engine.js only`);
  }
  return result;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await buildWidget();
