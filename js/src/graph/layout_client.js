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

/**
 * A layout service: {layout(request) -> Promise of computeLayout's result, destroy(), busy(), workerFailure()}.
 * `engineSource` is the worker's script (null: no worker); `loadEngine()` gives the engine module on the page.
 */
export function createLayoutClient({
  engineSource = ENGINE_SOURCE,
  loadEngine = importEngine,
  mainThreadLimit = MAIN_THREAD_LIMIT,
  budgetMs = 8,
} = {}) {
  // A request made while the worker runs another terminates it: dagre cannot be interrupted, and only the
  // newest layout is ever drawn. On the page, the running layout stops at its next chunk.
  let worker = null;
  let started = false; // the current worker said it runs
  let failure = engineSource ? null : "no layout worker is bundled"; // why layouts run on the page, once known
  let url = null;
  let pending = null; // {id, request, resolve, reject, inWorker, abort}
  let sequence = 0;
  let destroyed = false;

  function stop() {
    worker?.terminate();
    worker = null;
    started = false;
  }

  function settle(job, outcome, value) {
    if (pending !== job) return;
    pending = null;
    if (outcome === "resolve") job.resolve(value);
    else job.reject(value);
  }

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
      failure = `the layout worker cannot start here (${error?.message ?? error})`;
      return null;
    }
    worker.onmessage = ({ data }) => {
      if (data.ready) {
        started = true;
        return;
      }
      const job = pending;
      if (!job?.inWorker || data.id !== job.id) return;
      if (data.error) settle(job, "reject", new Error(`graph layout failed: ${data.error}`));
      else settle(job, "resolve", unpackLayout(job.request, data.packed));
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

  /** Reject the pending layout with StaleLayout(`why`) and stop its work: the worker it runs in, or its chunks. */
  function cancel(why) {
    const old = pending;
    if (!old) return;
    pending = null;
    old.reject(new StaleLayout(why));
    if (old.inWorker) stop();
    else old.abort();
  }

  function layout(request) {
    if (destroyed) return Promise.reject(new StaleLayout("the graph view was closed"));
    cancel("a newer layout replaced this one");
    sequence += 1;
    const id = sequence;
    return new Promise((resolve, reject) => {
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
