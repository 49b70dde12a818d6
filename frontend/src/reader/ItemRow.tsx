// One row of the item list. A row reads the selection through its own
// computed flag, so moving the selection (j/k) re-renders the two rows whose
// flag flips and nothing else; `memo` keeps a scroll or a page load from
// touching rows whose item did not change.
import { useComputed } from '@preact/signals';
import { memo } from 'preact/compat';
import { IconStarFilled } from '../ui/icons';
import { selectedId, type ListItem } from './store';
import { when } from './when';

export const ItemRow = memo(function ItemRow(props: { item: ListItem; feedName: string; top: number; onOpen: (id: string) => void }) {
  const { item } = props;
  const selected = useComputed(() => selectedId.value === item.id);
  return (
    <div
      id={`item-${item.id}`}
      role="option"
      aria-selected={selected.value}
      class={`item-row${item.unread ? ' unread' : ''}`}
      style={{ transform: `translateY(${props.top}px)` }}
      onClick={() => props.onOpen(item.id)}
    >
      <span class="meta">
        <span class="feed">{props.feedName}</span>
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
});
