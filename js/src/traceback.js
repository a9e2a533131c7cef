/** Tracebacks as the user reads them: the explorer's own frames folded, the user's shown; pure, no DOM. */

const FRAME = /^(\s*)File "([^"]*)", line \d+/;
// The package's own code; its examples are models, read as the user's.
const OWN = /[\\/]hookwidgets[\\/](?!examples[\\/])[^"]*\.py$/;
// torch's machinery calling a module (`_wrapped_call_impl`, `_call_impl`): between every two of the user's frames.
const CALLS = /[\\/]torch[\\/]nn[\\/]modules[\\/]module\.py$/;

/**
 * Whether a traceback frame's file is the explorer's own code.
 * @param {string} path
 */
export function isOwnFile(path) {
  return OWN.test(path);
}

/**
 * What folds a frame of `path` ("hookwidgets", "torch's module calls"), or null for a frame shown as it is.
 * @param {string} path
 */
export function foldedAs(path) {
  if (OWN.test(path)) return "hookwidgets";
  if (CALLS.test(path)) return "torch's module calls";
  return null;
}

/**
 * Split `text` into segments {text, folded, label, frames}: each run of the explorer's own frames (a `File "…"` line
 * and the lines indented under it), or of torch's module-call frames, is one folded segment naming whose they are and
 * counting them; everything else (the user's frames, the error) stays as it is, in order.
 * @param {string | null | undefined} text
 */
export function foldTraceback(text) {
  const lines = String(text ?? "").split("\n");
  /** @type {{label: string | null, lines: string[], frames: number}[]} */
  const segments = [];
  /** @type {(line: string, label: string | null, frame: boolean) => void} */
  const push = (line, label, frame) => {
    const last = segments[segments.length - 1];
    if (last && last.label === label) last.lines.push(line);
    else segments.push({ label, lines: [line], frames: 0 });
    if (frame && label !== null) segments[segments.length - 1].frames += 1;
  };
  let folding = null; // {indent, label} of the folded frame whose lines are being read
  for (const line of lines) {
    const frame = FRAME.exec(line);
    if (frame) {
      const label = foldedAs(frame[2]);
      folding = label === null ? null : { indent: frame[1].length, label };
      push(line, label, true);
      continue;
    }
    const indent = line.length - line.trimStart().length;
    if (folding !== null && line.trim() !== "" && indent > folding.indent) {
      push(line, folding.label, false);
      continue;
    }
    folding = null;
    push(line, null, false);
  }
  return segments.map(({ label, lines: kept, frames }) => ({
    text: kept.join("\n"),
    folded: label !== null,
    label: label ?? "",
    frames,
  }));
}
