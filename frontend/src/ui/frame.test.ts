import { describe, expect, test } from 'vitest';
import { oncePerFrame } from './frame';

function fakeFrames() {
  const callbacks = new Map<number, FrameRequestCallback>();
  let next = 1;
  return {
    request: (callback: FrameRequestCallback) => {
      callbacks.set(next, callback);
      return next++;
    },
    cancel: (id: number) => void callbacks.delete(id),
    /** Runs the callbacks of one frame. */
    frame() {
      const due = [...callbacks.values()];
      callbacks.clear();
      for (const callback of due) callback(0);
    },
    get waiting() {
      return callbacks.size;
    },
  };
}

describe('oncePerFrame', () => {
  test('many requests between two frames run the work once, in the next frame', () => {
    const frames = fakeFrames();
    let runs = 0;
    const batch = oncePerFrame(() => (runs += 1), frames.request, frames.cancel);
    for (let n = 0; n < 1000; n += 1) batch.schedule();
    expect(runs).toBe(0);
    expect(frames.waiting).toBe(1);
    frames.frame();
    expect(runs).toBe(1);
    frames.frame();
    expect(runs).toBe(1);
    batch.schedule();
    frames.frame();
    expect(runs).toBe(2);
  });

  test('cancel drops the work not done yet; a later request is served', () => {
    const frames = fakeFrames();
    let runs = 0;
    const batch = oncePerFrame(() => (runs += 1), frames.request, frames.cancel);
    batch.schedule();
    batch.cancel();
    frames.frame();
    expect(runs).toBe(0);
    batch.schedule();
    frames.frame();
    expect(runs).toBe(1);
  });
});
