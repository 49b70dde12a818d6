// A small Preact binding of @tanstack/virtual-core: only the rows in view
// (plus a few) are in the DOM, whatever the list's length.
import { Virtualizer, elementScroll, observeElementOffset, observeElementRect, type VirtualItem } from '@tanstack/virtual-core';
import { useLayoutEffect, useReducer, useState, type MutableRef } from 'preact/hooks';

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
        observeElementRect,
        observeElementOffset,
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
