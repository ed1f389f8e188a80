/**
 * An AbortSignal that aborts after `ms` with a `TimeoutError` (as `AbortSignal.timeout` does), or
 * as soon as `also` aborts, with its reason. Call `dispose()` once the operation has ended.
 *
 * Not `AbortSignal.any([AbortSignal.timeout(ms), also])`: on Node 20 the combined signal holds
 * its sources weakly, so the first garbage collection drops the timeout signal and its timer,
 * and a peer that accepts the connection and never answers is then waited for until `also`
 * aborts, if ever (nodejs/node#57736). Here the timer belongs to the caller until dispose().
 */
export function deadlineSignal(ms: number, also?: AbortSignal): { signal: AbortSignal; dispose(): void } {
  const controller = new AbortController();
  // Unref'd like AbortSignal.timeout's: an operation in flight keeps the process up by itself.
  const timer = setTimeout(() => controller.abort(new DOMException(`no answer within ${ms} ms`, 'TimeoutError')), ms);
  timer.unref();
  const onAlso = () => controller.abort(also!.reason);
  if (also?.aborted) controller.abort(also.reason);
  else also?.addEventListener('abort', onAlso, { once: true });
  return {
    signal: controller.signal,
    dispose() {
      clearTimeout(timer);
      also?.removeEventListener('abort', onAlso);
    },
  };
}
