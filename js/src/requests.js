/**
 * Requests to the kernel: each message the page sends carries a `request_id`, and the kernel answers each with
 * exactly one `{type: "reply", request_id, ok, error}` (docs/widget-protocol.md). Nothing is guessed from traitlet
 * changes and nothing times out: a request stays pending until its reply comes, however busy the kernel is.
 */

/** After this long without a reply a request is "slow": the page may say the kernel is busy or gone. */
export const SLOW_MS = 10000;

/**
 * Requests over `model`'s custom messages; returns {send, destroy}.
 * @param {import("./widget_model.js").WidgetModel} model
 * @returns {import("./widget_model.js").Requests}
 */
export function createRequests(model) {
  // Several views of one model each see every reply: ids are unique per view, and others' replies are ignored.
  const prefix = Math.random().toString(36).slice(2, 10);
  let count = 0;
  /** @type {Map<string | number, (answer: import("./widget_model.js").Answer) => void>} */
  const waiting = new Map(); // request_id -> resolve

  /** @param {import("./payloads.js").Reply} message */
  function onMessage(message) {
    if (message?.type !== "reply") return;
    const resolve = waiting.get(message.request_id);
    if (resolve === undefined) return;
    waiting.delete(message.request_id);
    resolve({ ok: Boolean(message.ok), error: typeof message.error === "string" ? message.error : "" });
  }
  model.on("msg:custom", onMessage);

  return {
    /** Send `{type, ...fields}` with a fresh request_id; resolves with `{ok, error}` when the reply comes. */
    send(content) {
      count += 1;
      const request_id = `${prefix}-${count}`;
      /** @type {Promise<import("./widget_model.js").Answer>} */
      const reply = new Promise((resolve) => waiting.set(request_id, resolve));
      model.send({ ...content, request_id });
      return reply;
    },
    destroy() {
      model.off("msg:custom", onMessage);
      waiting.clear();
    },
  };
}
