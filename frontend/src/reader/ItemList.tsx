// The item list: virtualized (only visible rows in the DOM), pages in as
// it scrolls, marks read on scroll when asked to. The list itself never
// reads the selection: each row does (ItemRow), and the list's
// `aria-activedescendant` is a signal bound to the DOM, so j/k re-render two
// rows and the reader's other updates (the article pane, the URL) do not
// reach the list (`memo`, a stable `onOpen`).
import { useComputed, useSignalEffect } from '@preact/signals';
import { memo } from 'preact/compat';
import { useEffect, useRef, type MutableRef } from 'preact/hooks';
import { useVirtualList } from '../ui/virtual';
import { prefs } from '../state/prefs';
import { Empty, Failed, Loading } from '../ui/states';
import { ItemRow } from './ItemRow';
import {
  canLoadMore,
  feeds,
  items,
  listState,
  loadList,
  loadMore,
  selectedId,
  selectedIndex,
  setRead,
  type Scope,
  type Show,
} from './store';
import { readerUrl } from './Reader';

export const ROW_HEIGHT = 64;

export const ItemList = memo(function ItemList(props: {
  listRef: MutableRef<HTMLDivElement | null>;
  onOpen: (id: string) => void;
  current: Scope;
  which: Show;
}) {
  const list = items.value;
  const state = listState.value;
  const scrollRef = props.listRef as MutableRef<HTMLElement | null>;
  const virtual = useVirtualList({ count: list.length, rowHeight: ROW_HEIGHT, scrollRef });
  const markedUpTo = useRef(0);

  // Keep the selected row in view (j/k, n/p), without re-rendering the list:
  // the effect follows the selected index, which changes only when it moves.
  const scrollTo = useRef(virtual.scrollToIndex);
  scrollTo.current = virtual.scrollToIndex;
  useSignalEffect(() => {
    const index = selectedIndex.value;
    if (index >= 0) scrollTo.current(index);
  });
  const activeDescendant = useComputed(() => (selectedId.value ? `item-${selectedId.value}` : undefined));

  useEffect(() => {
    markedUpTo.current = 0;
  }, [props.current, props.which]);

  // Page in before the end shows.
  const last = virtual.rows[virtual.rows.length - 1];
  useEffect(() => {
    if (last && last.index >= list.length - 20 && canLoadMore()) void loadMore();
  }, [last?.index, list.length]);

  function onScroll() {
    if (!prefs.value.markReadOnScroll) return;
    const element = props.listRef.current;
    if (!element) return;
    // Rows wholly scrolled past the top are read.
    const above = Math.floor(element.scrollTop / ROW_HEIGHT);
    if (above <= markedUpTo.current) return;
    const ids = items.value
      .slice(markedUpTo.current, above)
      .filter((item) => item.unread)
      .map((item) => item.id);
    markedUpTo.current = above;
    if (ids.length) setRead(ids, true);
  }

  if (state === 'loading' && !list.length) return <Loading label="Loading articles…" />;
  if (state instanceof Error) return <Failed error={state} retry={() => void loadList(props.current, props.which)} />;
  if (!list.length) {
    return props.which === 'unread' && props.current.kind !== 'search' && props.current.kind !== 'starred' ? (
      <Empty title="All caught up">
        Nothing unread here. <a href={readerUrl(props.current, 'all')}>Show all articles</a>
      </Empty>
    ) : props.current.kind === 'starred' ? (
      <Empty title="No starred articles">Press s on an article to star it.</Empty>
    ) : props.current.kind === 'search' ? (
      <Empty title="Nothing found">Try other words, or operators like is:unread and feed:name.</Empty>
    ) : (
      <Empty title="No articles yet">New articles appear here as your feeds are pulled.</Empty>
    );
  }

  const feedMap = feeds.value;
  return (
    <div
      class="list-scroll"
      ref={props.listRef}
      tabIndex={0}
      role="listbox"
      aria-label="Articles"
      aria-activedescendant={activeDescendant}
      onScroll={onScroll}
    >
      <div class="list-inner" style={{ height: `${virtual.totalSize}px` }}>
        {virtual.rows.map((row) => {
          const item = list[row.index];
          if (!item) return null;
          return <ItemRow key={item.id} item={item} feedName={feedMap.get(item.feedId)?.name ?? ''} top={row.start} onOpen={props.onOpen} />;
        })}
      </div>
      {state === 'more' && (
        <div class="list-foot" style={{ transform: `translateY(${virtual.totalSize}px)`, position: 'absolute', left: 0, right: 0, top: 0 }}>
          Loading more…
        </div>
      )}
    </div>
  );
});
