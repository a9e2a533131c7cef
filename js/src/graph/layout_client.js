/**
 * Runs layouts in a Web Worker, or on the page in short chunks where no worker can start (some VS Code webviews);
 * the newest request wins.
 */

import { runChunked } from "./chunked.js";
import { ENGINE_SOURCE, engineURL, importEngine } from "./layout_engine_source.js";
import { unpackLayout } from "./layout_pack.js";

/** Graphs with at most this many items are laid out on the page (a few ms, no worker start-up). */
export const MAIN_THREAD_LIMIT = 40;

/** Error of a layout that a newer request replaced; callers ignore it. */
export class StaleLayout extends Error {}

/** @typedef {import("./layout_request.js").LayoutRequest} LayoutRequest */
/** @typedef {import("./layout.js").Layout} Layout */
/** @typedef {import("./layout_pack.js").PackedLayout} PackedLayout */
/**
 * The pending layout: its request, its promise's settlers, where it runs, and how to stop it on the page.
 * @typedef {{id: number, request: LayoutRequest, resolve: (layout: Layout) => void, reject: (error: unknown) => void,
 *   inWorker?: boolean, abort?: () => void}} Job
 */
/**
 * What the page imports to lay out without a worker.
 * @typedef {{layoutSteps: typeof import("./layout.js").layoutSteps}} Engine
 */

/**
 * A layout service: {layout(request) -> Promise of computeLayout's result, destroy(), busy(), workerFailure()}.
 * `engineSource` is the worker's script (null: no worker); `loadEngine()` gives the engine module on the page.
 * @param {{engineSource?: string | null, loadEngine?: () => Promise<Engine>, mainThreadLimit?: number,
 *   budgetMs?: number}} [options]
 */
export function createLayoutClient({
  engineSource = ENGINE_SOURCE,
  loadEngine = importEngine,
  mainThreadLimit = MAIN_THREAD_LIMIT,
  budgetMs = 8,
} = {}) {
  // A request made while the worker runs another terminates it: dagre cannot be interrupted, and only the
  // newest layout is ever drawn. On the page, the running layout stops at its next chunk.
  /** @type {Worker | null} */
  let worker = null;
  let started = false; // the current worker said it runs
  /** @type {string | null} */
  let failure = engineSource ? null : "no layout worker is bundled"; // why layouts run on the page, once known
  /** @type {string | null} */
  let url = null;
  /** @type {Job | null} */
  let pending = null; // {id, request, resolve, reject, inWorker, abort}
  let sequence = 0;
  let destroyed = false;

  function stop() {
    worker?.terminate();
    worker = null;
    started = false;
  }

  /**
   * @param {Job} job
   * @param {"resolve" | "reject"} outcome
   * @param {unknown} value a Layout to resolve with, an error to reject with
   */
  function settle(job, outcome, value) {
    if (pending !== job) return;
    pending = null;
    if (outcome === "resolve") job.resolve(/** @type {Layout} */ (value));
    else job.reject(value);
  }

  /** @param {Job} job */
  function onPage(job) {
    const controller = new AbortController();
    job.inWorker = false;
    job.abort = () => controller.abort();
    loadEngine()
      .then((engine) => runChunked(engine.layoutSteps(job.request), { budgetMs, signal: controller.signal }))
      .then(
        (layout) => settle(job, "resolve", layout),
        (error) => settle(job, "reject", error),
      );
  }

  /** A running worker, or null (with `failure` set) where none can start here. */
  function ensureWorker() {
    if (worker || failure) return worker;
    if (typeof Worker === "undefined") {
      failure = "Web Workers are not available here";
      return null;
    }
    try {
      url ??= engineURL(engineSource);
      worker = new Worker(url, { type: "module" });
    } catch (error) {
      failure = `the layout worker cannot start here (${/** @type {Error} */ (error)?.message ?? error})`;
      return null;
    }
    /** @param {MessageEvent<import("./layout_engine.js").LayoutAnswer>} event */
    worker.onmessage = ({ data }) => {
      if (data.ready) {
        started = true;
        return;
      }
      const job = pending;
      if (!job?.inWorker || data.id !== job.id) return;
      if (data.error) settle(job, "reject", new Error(`graph layout failed: ${data.error}`));
      else settle(job, "resolve", unpackLayout(job.request, /** @type {PackedLayout} */ (data.packed)));
    };
    worker.onerror = (event) => {
      event.preventDefault();
      const job = pending?.inWorker ? pending : null;
      const wasStarted = started;
      stop(); // a fresh worker serves the next request
      if (!wasStarted) {
        // It never ran: a CSP refusing blob: workers, or no module workers here. From now on, the page lays out.
        failure = `the layout worker did not start here (${event.message || "refused"})`;
        if (job) onPage(job);
        return;
      }
      if (job) settle(job, "reject", new Error(`graph layout worker failed: ${event.message || "unknown error"}`));
    };
    return worker;
  }

  /**
   * Reject the pending layout with StaleLayout(`why`) and stop its work: the worker it runs in, or its chunks.
   * @param {string} why
   */
  function cancel(why) {
    const old = pending;
    if (!old) return;
    pending = null;
    old.reject(new StaleLayout(why));
    if (old.inWorker) stop();
    else /** @type {() => void} */ (old.abort)(); // a job on the page always has one (onPage)
  }

  /**
   * @param {LayoutRequest} request
   * @returns {Promise<Layout>}
   */
  function layout(request) {
    if (destroyed) return Promise.reject(new StaleLayout("the graph view was closed"));
    cancel("a newer layout replaced this one");
    sequence += 1;
    const id = sequence;
    return new Promise((resolve, reject) => {
      /** @type {Job} */
      const job = { id, request, resolve, reject };
      pending = job;
      const size = request.nodes.length + request.boxes.length;
      const running = size > mainThreadLimit ? ensureWorker() : null;
      if (!running) {
        onPage(job);
        return;
      }
      job.inWorker = true;
      running.postMessage({ id, request });
    });
  }

  function destroy() {
    destroyed = true;
    cancel("the graph view was closed");
    stop();
    if (url) URL.revokeObjectURL(url);
    url = null;
  }

  return { layout, destroy, busy: () => pending !== null, workerFailure: () => failure };
}
