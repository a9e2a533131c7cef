/** Tracebacks as the user reads them: the explorer's own frames folded, the user's shown; pure, no DOM. */

const FRAME = /^(\s*)File "([^"]*)", line \d+/;
// The package's own code; its examples are models, read as the user's.
const OWN = /[\\/]hookwidgets[\\/](?!examples[\\/])[^"]*\.py$/;

/** Whether a traceback frame's file is the explorer's own code. */
export function isOwnFile(path) {
  return OWN.test(path);
}

/**
 * Split `text` into segments {text, folded, frames}: each run of the explorer's own frames (a `File "…"` line and
 * the lines indented under it) is one folded segment counting its frames; everything else stays as it is, in order.
 */
export function foldTraceback(text) {
  const lines = String(text ?? "").split("\n");
  const segments = [];
  const push = (line, folded) => {
    const last = segments[segments.length - 1];
    if (last && last.folded === folded) last.lines.push(line);
    else segments.push({ folded, lines: [line], frames: 0 });
    if (folded && FRAME.test(line)) segments[segments.length - 1].frames += 1;
  };
  let inOwn = null; // the indent of the own frame whose lines are being read, or null
  for (const line of lines) {
    const frame = FRAME.exec(line);
    if (frame) {
      inOwn = isOwnFile(frame[2]) ? frame[1].length : null;
      push(line, inOwn !== null);
      continue;
    }
    const indent = line.length - line.trimStart().length;
    if (inOwn !== null && line.trim() !== "" && indent > inOwn) {
      push(line, true);
      continue;
    }
    inOwn = null;
    push(line, false);
  }
  return segments.map(({ folded, lines: kept, frames }) => ({ text: kept.join("\n"), folded, frames }));
}
