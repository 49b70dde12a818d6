// The item list: virtualized (only visible rows in the DOM), pages in as
// it scrolls, marks read on scroll when asked to.
import { useEffect, useRef, type MutableRef } from 'preact/hooks';
import { useVirtualList } from '../ui/virtual';
import { prefs } from '../state/prefs';
import { Empty, Failed, Loading } from '../ui/states';
import { IconStarFilled } from '../ui/icons';
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

const relative = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto', style: 'short' });
const dateFormat = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric' });

export function when(iso: string, now = Date.now()): string {
  const then = Date.parse(iso);
  const minutes = Math.round((then - now) / 60_000);
  if (Math.abs(minutes) < 60) return relative.format(minutes, 'minute');
  const hours = Math.round(minutes / 60);
  if (Math.abs(hours) < 24) return relative.format(hours, 'hour');
  const days = Math.round(hours / 24);
  if (Math.abs(days) < 7) return relative.format(days, 'day');
  return dateFormat.format(then);
}

export function ItemList(props: {
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

  // Keep the selected row in view (j/k, n/p).
  const index = selectedIndex.value;
  useEffect(() => {
    if (index >= 0) virtual.scrollToIndex(index);
  }, [index]);

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

  const selected = selectedId.value;
  const feedMap = feeds.value;
  return (
    <div
      class="list-scroll"
      ref={props.listRef}
      tabIndex={0}
      role="listbox"
      aria-label="Articles"
      aria-activedescendant={selected ? `item-${selected}` : undefined}
      onScroll={onScroll}
    >
      <div class="list-inner" style={{ height: `${virtual.totalSize}px` }}>
        {virtual.rows.map((row) => {
          const item = list[row.index];
          if (!item) return null;
          const feed = feedMap.get(item.feedId);
          return (
            <div
              key={item.id}
              id={`item-${item.id}`}
              role="option"
              aria-selected={item.id === selected}
              class={`item-row${item.unread ? ' unread' : ''}`}
              style={{ transform: `translateY(${row.start}px)` }}
              onClick={() => props.onOpen(item.id)}
            >
              <span class="meta">
                <span class="feed">{feed?.name ?? ''}</span>
                {item.starred && (
                  <span class="star">
                    <IconStarFilled size={12} label="Starred" />
                  </span>
                )}
                <time dateTime={item.pubDate}>{when(item.pubDate)}</time>
              </span>
              <span class="title">
                {item.unread && <span class="sr-only">Unread: </span>}
                {item.title || '(untitled)'}
              </span>
            </div>
          );
        })}
      </div>
      {state === 'more' && (
        <div class="list-foot" style={{ transform: `translateY(${virtual.totalSize}px)`, position: 'absolute', left: 0, right: 0, top: 0 }}>
          Loading more…
        </div>
      )}
    </div>
  );
}
