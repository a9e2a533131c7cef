/** Runs layouts in a Web Worker made from a Blob URL, the newest request winning; tiny graphs stay on the main thread. */

import { computeLayout } from "./layout.js";
import { unpackLayout } from "./layout_pack.js";

/* global __HW_LAYOUT_WORKER__ */
// The worker's bundled source, inlined by js/build.mjs; absent under `node --test`.
const BUNDLED = typeof __HW_LAYOUT_WORKER__ === "string" ? __HW_LAYOUT_WORKER__ : null;

/** Graphs with at most this many items are laid out on the main thread (a few ms, no worker start-up). */
export const MAIN_THREAD_LIMIT = 40;

/** Error of a layout that a newer request replaced; callers ignore it. */
export class StaleLayout extends Error {}

/** A layout service: {layout(request) -> Promise of computeLayout's result, destroy(), busy()}. */
export function createLayoutClient({ workerSource = BUNDLED, mainThreadLimit = MAIN_THREAD_LIMIT } = {}) {
  // A request made while another runs terminates that worker: dagre cannot be interrupted, and
  // only the newest layout is ever drawn.
  let worker = null;
  let url = null;
  let pending = null; // {id, resolve, reject}
  let sequence = 0;
  let destroyed = false;

  function stop() {
    worker?.terminate();
    worker = null;
  }

  function start() {
    if (!url) url = URL.createObjectURL(new Blob([workerSource], { type: "text/javascript" }));
    worker = new Worker(url);
    worker.onmessage = ({ data }) => {
      if (!pending || data.id !== pending.id) return;
      const { resolve, reject, request } = pending;
      pending = null;
      if (data.error) reject(new Error(`graph layout failed: ${data.error}`));
      else resolve(unpackLayout(request, data.packed));
    };
    worker.onerror = (event) => {
      event.preventDefault();
      const failed = pending;
      pending = null;
      stop(); // a fresh worker serves the next request
      failed?.reject(new Error(`graph layout worker failed: ${event.message || "unknown error"}`));
    };
  }

  function layout(request) {
    if (destroyed) return Promise.reject(new StaleLayout("the graph view was closed"));
    if (pending) {
      pending.reject(new StaleLayout("a newer layout replaced this one"));
      pending = null;
      stop();
    }
    const size = request.nodes.length + request.boxes.length;
    if (size <= mainThreadLimit) {
      try {
        return Promise.resolve(computeLayout(request));
      } catch (error) {
        return Promise.reject(error);
      }
    }
    if (!workerSource || typeof Worker === "undefined") {
      return Promise.reject(new Error(`no Web Worker here to lay out ${size} items off the page; collapse clusters`));
    }
    try {
      if (!worker) start();
    } catch (error) {
      return Promise.reject(new Error(`cannot start the layout worker (${error.message}); collapse clusters`));
    }
    sequence += 1;
    const id = sequence;
    return new Promise((resolve, reject) => {
      pending = { id, resolve, reject, request };
      worker.postMessage({ id, request });
    });
  }

  function destroy() {
    destroyed = true;
    pending?.reject(new StaleLayout("the graph view was closed"));
    pending = null;
    stop();
    if (url) URL.revokeObjectURL(url);
    url = null;
  }

  return { layout, destroy, busy: () => pending !== null };
}
