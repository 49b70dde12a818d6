// Groups and feeds with their unread counts (kept live by `feedUpdated`).
import { useSignal } from '@preact/signals';
import { memo } from 'preact/compat';
import { FeedIcon } from './FeedIcon';
import { IconChevron, IconChevronDown, IconEdit, IconPlus, IconStar } from '../ui/icons';
import { feeds, groupUnread, groups, totalUnread, type Scope, type Show } from './store';
import { readerUrl } from './Reader';
import { Opml } from './Opml';

export const Sidebar = memo(function Sidebar(props: { current: Scope; which: Show; onAdd: () => void; onEdit: (id: string) => void }) {
  const { current, which } = props;
  const collapsed = useSignal<Set<string>>(new Set());
  const isCurrent = (kind: Scope['kind'], id?: string) =>
    current.kind === kind && (id === undefined || current.id === id) ? 'page' : undefined;
  const total = totalUnread.value;

  return (
    <nav class="sidebar" aria-label="Feeds">
      <ul class="side-list">
        <li class={`side-item${total ? ' has-unread' : ''}`}>
          <a href={readerUrl({ kind: 'all' }, which)} aria-current={isCurrent('all')}>
            <span class="name">All items</span>
            {total > 0 && <span class="badge">{total}</span>}
          </a>
        </li>
        <li class="side-item">
          <a href={readerUrl({ kind: 'starred' }, 'all')} aria-current={isCurrent('starred')}>
            <IconStar size={16} />
            <span class="name">Starred</span>
          </a>
        </li>
      </ul>
      <div class="row">
        <h2>Subscriptions</h2>
      </div>
      <div class="row side-actions">
        <button type="button" class="btn small" onClick={props.onAdd}>
          <IconPlus size={14} /> Add feed
        </button>
        <Opml />
      </div>
      <ul class="side-list">
        {groups.value.map((group) => {
          const unread = groupUnread(group);
          const closed = collapsed.value.has(group.id);
          return (
            <li key={group.id} class={`side-item${unread ? ' has-unread' : ''}`}>
              <div class="group-line">
                <button
                  type="button"
                  class="group-toggle"
                  aria-expanded={!closed}
                  aria-label={`${closed ? 'Expand' : 'Collapse'} ${group.name}`}
                  onClick={() => {
                    const next = new Set(collapsed.value);
                    if (closed) next.delete(group.id);
                    else next.add(group.id);
                    collapsed.value = next;
                  }}
                >
                  {closed ? <IconChevron size={14} /> : <IconChevronDown size={14} />}
                </button>
                <a href={readerUrl({ kind: 'group', id: group.id }, which)} aria-current={isCurrent('group', group.id)}>
                  <span class="name">{group.name}</span>
                  {unread > 0 && <span class="badge">{unread}</span>}
                </a>
              </div>
              {!closed && group.feedIds.length > 0 && (
                <ul class="side-feeds">
                  {group.feedIds.map((id) => {
                    const feed = feeds.value.get(id);
                    if (!feed) return null;
                    const failing = (feed.fetchState?.consecutiveFailures ?? 0) > 0;
                    return (
                      <li key={id} class={`side-item feed-line${feed.unreadCount ? ' has-unread' : ''}`}>
                        <a href={readerUrl({ kind: 'feed', id }, which)} aria-current={isCurrent('feed', id)}>
                          <FeedIcon feed={feed} />
                          <span class="name">{feed.name}</span>
                          {failing && (
                            <span class="err" title={feed.fetchState?.lastError ?? 'failing'}>
                              !<span class="sr-only"> (failing: {feed.fetchState?.lastError})</span>
                            </span>
                          )}
                          {feed.unreadCount > 0 && <span class="badge">{feed.unreadCount}</span>}
                        </a>
                        <button type="button" class="group-toggle edit" aria-label={`Edit ${feed.name}`} onClick={() => props.onEdit(id)}>
                          <IconEdit size={13} />
                        </button>
                      </li>
                    );
                  })}
                </ul>
              )}
            </li>
          );
        })}
      </ul>
      {groups.value.length > 0 && feeds.value.size === 0 && (
        <p class="side-empty">No subscriptions yet. Add a feed or import an OPML file.</p>
      )}
    </nav>
  );
});
