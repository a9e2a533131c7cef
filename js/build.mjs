/** Bundle the widget: the layout worker first (to a string), then src/index.js with that string inlined. */

import { build } from "esbuild";

const common = { bundle: true, platform: "browser", target: "es2020", logLevel: "warning" };

const worker = await build({ ...common, entryPoints: ["src/graph/layout_worker.js"], format: "iife", minify: true, write: false });

await build({
  ...common,
  entryPoints: ["src/index.js"],
  format: "esm",
  outfile: "../hookwidgets/static/widget.js",
  define: { __HW_LAYOUT_WORKER__: JSON.stringify(worker.outputFiles[0].text) },
});
