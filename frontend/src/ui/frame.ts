// Work asked for many times between two frames, done once, before the next
// frame paints: 1,000 status events a second make at most one render a frame.
export interface FrameBatch {
  /** Asks for the work; asking again before it ran changes nothing. */
  schedule(): void;
  /** Drops work asked for and not done yet. */
  cancel(): void;
}

export function oncePerFrame(
  run: () => void,
  request: (callback: FrameRequestCallback) => number = (callback) => requestAnimationFrame(callback),
  cancelRequest: (id: number) => void = (id) => cancelAnimationFrame(id),
): FrameBatch {
  let pending = 0;
  return {
    schedule() {
      if (pending !== 0) return;
      pending = request(() => {
        pending = 0;
        run();
      });
    },
    cancel() {
      if (pending !== 0) cancelRequest(pending);
      pending = 0;
    },
  };
}
