// A small Preact binding of @tanstack/virtual-core: only the rows in view
// (plus a few) are in the DOM, whatever the list's length.
import { Virtualizer, elementScroll, observeElementOffset, observeElementRect, type VirtualItem } from '@tanstack/virtual-core';
import { useLayoutEffect, useReducer, useState, type MutableRef } from 'preact/hooks';

type Observe = typeof observeElementRect<HTMLElement>;

/**
 * Starts one of virtual-core's observers in the next animation frame rather
 * than during the render's layout effects: its first reading of the
 * element's size or scroll offset would force a layout in the middle of the
 * render's task. In the frame, the layout is the one the frame does anyway.
 * Until then the list uses `initialRect` and an offset of 0 (a list just
 * mounted is at its top).
 */
function inNextFrame<T extends Observe | typeof observeElementOffset<HTMLElement>>(observe: T): T {
  return ((instance: Parameters<T>[0], callback: Parameters<T>[1]) => {
    let stop: (() => void) | undefined;
    const frame = requestAnimationFrame(() => {
      stop = (observe as (i: typeof instance, c: typeof callback) => (() => void) | undefined)(instance, callback);
    });
    return () => {
      cancelAnimationFrame(frame);
      stop?.();
    };
  }) as T;
}

const observeRectInFrame = inNextFrame(observeElementRect<HTMLElement>);
const observeOffsetInFrame = inNextFrame(observeElementOffset<HTMLElement>);

export interface VirtualList {
  rows: VirtualItem[];
  totalSize: number;
  scrollToIndex(index: number): void;
  virtualizer: Virtualizer<HTMLElement, Element>;
}

export function useVirtualList(options: {
  count: number;
  rowHeight: number;
  scrollRef: MutableRef<HTMLElement | null>;
  overscan?: number;
}): VirtualList {
  const [, rerender] = useReducer((n: number) => n + 1, 0);
  const [virtualizer] = useState(
    () =>
      new Virtualizer<HTMLElement, Element>({
        count: options.count,
        getScrollElement: () => options.scrollRef.current,
        estimateSize: () => options.rowHeight,
        overscan: options.overscan ?? 8,
        scrollToFn: elementScroll,
        observeElementRect: observeRectInFrame,
        observeElementOffset: observeOffsetInFrame,
        onChange: () => rerender(undefined),
        // Rows never change height: no measuring.
        initialRect: { width: 0, height: 800 },
      }),
  );
  virtualizer.setOptions({
    ...virtualizer.options,
    count: options.count,
    estimateSize: () => options.rowHeight,
    getScrollElement: () => options.scrollRef.current,
  });
  useLayoutEffect(() => virtualizer._didMount(), []);
  useLayoutEffect(() => {
    virtualizer._willUpdate();
  });
  return {
    rows: virtualizer.getVirtualItems(),
    totalSize: virtualizer.getTotalSize(),
    scrollToIndex: (index) => virtualizer.scrollToIndex(index, { align: 'auto' }),
    virtualizer,
  };
}
