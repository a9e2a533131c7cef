/** The anywidget model and the kernel requests as the views use them: JSDoc types only, for tsc. */

/** @typedef {import("./payloads.js").Traitlets} Traitlets */

/**
 * A synced traitlet's change event (`model.on("change:status", …)`).
 * @typedef {`change:${keyof Traitlets}`} ChangeEvent
 */

/**
 * Subscribing to the model: a traitlet's change, or the kernel's messages (each one a reply).
 * @typedef {((event: ChangeEvent, callback: () => void) => void)
 *   & ((event: "msg:custom", callback: (message: import("./payloads.js").Reply) => void) => void)} Listener
 */

/**
 * The model anywidget gives `render`: traitlets by name; the page writes only `selected`, `theme` and `frame`
 * (docs/widget-protocol.md), and sends messages.
 * @typedef {object} WidgetModel
 * @property {<K extends keyof Traitlets>(name: K) => Traitlets[K]} get
 * @property {<K extends "selected" | "theme" | "frame">(name: K, value: Traitlets[K]) => void} set
 * @property {() => void} save_changes
 * @property {Listener} on
 * @property {Listener} off
 * @property {(content: import("./payloads.js").PageMessage) => void} send
 */

/**
 * A message without its `request_id`, which `requests.send` adds; distributes over a union of messages.
 * @template M
 * @typedef {M extends unknown ? Omit<M, "request_id"> : never} WithoutId
 */

/** What a view asks the kernel. @typedef {WithoutId<import("./payloads.js").PageMessage>} Request */

/** The kernel's answer to a request. @typedef {{ok: boolean, error: string}} Answer */

/**
 * Requests over the model's messages (requests.js).
 * @typedef {{send(content: Request): Promise<Answer>, destroy(): void}} Requests
 */

/**
 * The run view's model (`hookwidgets.open_run(log_dir)` displayed): its traitlets by name; the page writes `selected`,
 * `kind`, `field`, `step` and `rank` (docs/widget-protocol.md).
 * @typedef {object} RunModel
 * @property {<K extends keyof import("./payloads.js").RunTraitlets>(name: K) => import("./payloads.js").RunTraitlets[K]} get
 * @property {<K extends "selected" | "kind" | "field" | "step" | "rank">(name: K, value: import("./payloads.js").RunTraitlets[K]) => void} set
 * @property {() => void} save_changes
 * @property {(event: `change:${keyof import("./payloads.js").RunTraitlets}`, callback: () => void) => void} on
 * @property {(event: `change:${keyof import("./payloads.js").RunTraitlets}`, callback: () => void) => void} off
 */

export {};
