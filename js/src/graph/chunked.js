/** Running a generator on the page in short tasks, giving the page its turn between them, so it never freezes. */

/**
 * A promise settled in a new task (a MessageChannel message: not clamped to 4 ms as nested timeouts are).
 * @returns {Promise<void>}
 */
export function nextTask() {
  return new Promise((resolve) => {
    const { port1, port2 } = new MessageChannel();
    port1.onmessage = () => {
      port1.close();
      resolve();
    };
    port2.postMessage(null);
  });
}

/**
 * Step `steps` until done, for about `budgetMs` per task (at least one step each), awaiting `yieldTask()` between tasks;
 * each yielded value goes to `onStep`. Resolves to the generator's return value; rejects with `signal`'s reason once
 * it is aborted.
 * @template Y, R
 * @param {Iterator<Y, R>} steps
 * @param {{budgetMs?: number, signal?: AbortSignal, yieldTask?: () => Promise<unknown>,
 *   onStep?: (value: Y) => void}} [options]
 * @returns {Promise<R>}
 */
export async function runChunked(steps, { budgetMs = 8, signal, yieldTask = nextTask, onStep } = {}) {
  for (;;) {
    signal?.throwIfAborted();
    const start = performance.now();
    let step;
    do {
      step = steps.next();
      if (!step.done) onStep?.(step.value);
    } while (!step.done && performance.now() - start < budgetMs);
    if (step.done) return step.value;
    await yieldTask();
  }
}
