import { beforeEach, describe, expect, test, vi } from 'vitest';

// The store talks to the server only through api/client: replaced here by a
// recorder that answers like the server would.
const sent: { query: string; variables: Record<string, unknown> }[] = [];
let online = true;
vi.mock('../api/client', async () => {
  const actual = await vi.importActual<typeof import('../api/client')>('../api/client');
  return {
    ...actual,
    mutate: vi.fn(async (doc: { toString(): string }, variables: Record<string, unknown>) => {
      if (!online) throw new actual.ApiError('offline', 'NETWORK', { network: true });
      sent.push({ query: doc.toString(), variables });
      return { markAllRead: 2, markItemsRead: 1, markItemsUnread: 1, starItems: 1, unstarItems: 1 };
    }),
    query: vi.fn(async () => ({ groups: [], settings: null, items: { totalCount: 0, pageInfo: { hasNextPage: false, endCursor: null }, nodes: [] } })),
    subscribe: vi.fn(() => () => undefined),
  };
});

const store = await import('./store');
type Feed = import('./store').Feed;
type ListItem = import('./store').ListItem;
type Group = import('./store').Group;

function feed(id: string, name: string, unreadCount: number): Feed {
  return { id, name, link: `https://${id}.example/feed`, suspended: false, unreadCount, itemCount: 10, group: { id: 'g1' } } as Feed;
}

function item(id: string, feedId: string, unread: boolean, createdAt = '2026-01-01T00:00:00.000000Z'): ListItem {
  return { id, feedId, title: `Item ${id}`, link: null, pubDate: createdAt, unread, starred: false, createdAt } as ListItem;
}

beforeEach(() => {
  sent.length = 0;
  online = true;
  store.feeds.value = new Map([
    ['1', feed('1', 'Alpha Weekly', 3)],
    ['2', feed('2', 'Beta News', 1)],
  ]);
  store.groups.value = [{ id: 'g1', name: 'Tech', isDefault: true, feedIds: ['1', '2'] } as Group];
  store.items.value = [item('10', '1', true), item('11', '1', true), item('12', '2', false)];
  localStorage.clear();
});

describe('search operators', () => {
  test('is:, feed: and group: become filter fields; the rest is full text', () => {
    expect(store.parseSearch('rust async is:unread feed:alpha')).toEqual({ unread: true, feedId: '1', query: 'rust async' });
    expect(store.parseSearch('is:starred group:tech')).toEqual({ starred: true, groupId: 'g1' });
    expect(store.parseSearch('is:read "exact words"')).toEqual({ unread: false, query: '"exact words"' });
    // An unknown feed matches nothing rather than everything.
    expect(store.parseSearch('feed:nosuch').feedId).toBe('0');
    expect(store.parseSearch('time: 10:30')).toEqual({ query: 'time: 10:30' });
  });

  test('scopes and the unread switch make the items filter', () => {
    expect(store.filterFor({ kind: 'feed', id: '2' }, 'unread')).toEqual({ feedId: '2', unread: true });
    expect(store.filterFor({ kind: 'group', id: 'g1' }, 'all')).toEqual({ groupId: 'g1' });
    expect(store.filterFor({ kind: 'starred' }, 'unread')).toEqual({ starred: true });
  });
});

describe('read and star changes', () => {
  test('marking read updates the row and the feed’s unread count at once, then the server', async () => {
    store.setRead(['10', '12'], true);
    expect(store.items.value.find((entry) => entry.id === '10')?.unread).toBe(false);
    // Only the item that was unread changes a count.
    expect(store.feeds.value.get('1')?.unreadCount).toBe(2);
    expect(store.feeds.value.get('2')?.unreadCount).toBe(1);
    await store.flushChanges();
    expect(sent.map((call) => call.variables)).toEqual([{ ids: ['10', '12'] }]);
    expect(store.pendingChanges.value).toBe(0);
  });

  test('offline changes wait and go out on the next flush', async () => {
    online = false;
    store.setStarred(['11'], true);
    await store.flushChanges();
    expect(store.items.value.find((entry) => entry.id === '11')?.starred).toBe(true);
    expect(store.pendingChanges.value).toBe(1);
    expect(JSON.parse(localStorage.getItem('trellis.pending-changes') ?? '[]')).toEqual([{ kind: 'star', id: '11' }]);
    online = true;
    expect(await store.flushChanges()).toBe(true);
    expect(sent.map((call) => call.variables)).toEqual([{ ids: ['11'] }]);
  });

  test('the open article changes even when the list does not hold it (a reload offline), and its change waits', async () => {
    online = false;
    store.items.value = [];
    store.openArticle.value = { id: '42', feedId: '1', link: null, unread: false, starred: false };
    store.setStarred(['42'], true);
    store.setRead(['42'], false);
    expect(store.marksOf('42')).toMatchObject({ starred: true, unread: true });
    // Its feed's count follows, as for an item in the list.
    expect(store.feeds.value.get('1')?.unreadCount).toBe(4);
    await store.flushChanges();
    expect(store.pendingChanges.value).toBe(2);
    online = true;
    expect(await store.flushChanges()).toBe(true);
    expect(sent.map((call) => call.variables)).toEqual([{ ids: ['42'] }, { ids: ['42'] }]);
    // Another item's marks are nobody's business here.
    expect(store.marksOf('43')).toBeNull();
    store.openArticle.value = null;
  });

  test('mark above / below read only touches unread rows on that side', async () => {
    store.items.value = [item('1', '1', true), item('2', '1', true), item('3', '1', true), item('4', '1', false)];
    store.markBelow(1);
    expect(store.items.value.map((entry) => entry.unread)).toEqual([true, true, false, false]);
    store.markAbove(1);
    expect(store.items.value.map((entry) => entry.unread)).toEqual([false, true, false, false]);
    await store.flushChanges();
  });

  test('mark all read is bounded by the newest item the list has shown', async () => {
    const { query } = await import('../api/client');
    vi.mocked(query).mockResolvedValueOnce({
      items: {
        totalCount: 2,
        pageInfo: { hasNextPage: false, endCursor: null },
        nodes: [item('20', '1', true, '2026-02-01T10:00:00.000000Z'), item('21', '1', true, '2026-02-01T09:00:00.000000Z')],
      },
    } as never);
    await store.loadList({ kind: 'feed', id: '1' }, 'unread');
    await store.markAllRead();
    const call = sent.find((entry) => 'before' in entry.variables);
    expect(call?.variables).toEqual({ feedId: '1', before: '2026-02-01T10:00:00.000000Z' });
    expect(store.items.value.every((entry) => !entry.unread)).toBe(true);
  });
});
