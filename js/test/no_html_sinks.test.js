import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

// Spelled in pieces so this file does not trip the same check.
const H = "HTML";
const SINKS = [
  `inner${H}`,
  `outer${H}`,
  `insertAdjacent${H}`,
  ["createContextual", "Fragment"].join(""),
  ["document", "write"].join("."),
];
const ROOT = fileURLToPath(new URL("..", import.meta.url));

function sourceFiles(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return /\.(js|css)$/.test(entry.name) ? [full] : [];
  });
}

test("no source file uses an HTML-parsing DOM sink", () => {
  const files = [...sourceFiles(join(ROOT, "src")), ...sourceFiles(join(ROOT, "test"))];
  assert.ok(files.some((file) => file.endsWith("index.js")), "src/index.js was scanned");
  const hits = [];
  for (const file of files) {
    const text = readFileSync(file, "utf8");
    for (const sink of SINKS) if (text.includes(sink)) hits.push(`${file}: ${sink}`);
  }
  assert.deepEqual(hits, []);
});
