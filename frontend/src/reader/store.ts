// The reader's state: groups and feeds with live unread counts, the item
// list of the current scope (paged, keyset), the selected item, and every
// read/star change (optimistic, queued while offline).
import { batch, computed, signal } from '@preact/signals';
import { ApiError, mutate, onReconnect, query, subscribe } from '../api/client';
import {
  MarkAllReadDocument,
  MarkReadDocument,
  MarkUnreadDocument,
  ReaderFeedUpdatedDocument,
  ReaderGroupsDocument,
  ReaderItemsDocument,
  StarDocument,
  UnstarDocument,
  type FeedFieldsFragment,
  type ItemFilter,
  type ReaderGroupsQuery,
  type ReaderItemsQuery,
} from '../gql/graphql';
import { updateStoredArticles } from '../offline/articles';
import { ChangeQueue, type ChangeKind } from '../offline/queue';
import { toast } from '../ui/toast';

export type Feed = FeedFieldsFragment;
export type Group = Omit<ReaderGroupsQuery['groups'][number], 'feeds'> & { feedIds: string[] };
export type ListItem = ReaderItemsQuery['items']['nodes'][number];

export type ScopeKind = 'all' | 'feed' | 'group' | 'starred' | 'search';
export interface Scope {
  kind: ScopeKind;
  id?: string;
  query?: string;
}
export type Show = 'unread' | 'all';

/** Items per page; the list asks for the next page before the end shows. */
export const PAGE = 100;

// ---- feeds and groups --------------------------------------------------------

export const groups = signal<Group[]>([]);
export const feeds = signal<Map<string, Feed>>(new Map());
export const feedsState = signal<'loading' | 'ready' | ApiError>('loading');
export const serverSettings = signal<ReaderGroupsQuery['settings'] | null>(null);

export const totalUnread = computed(() => {
  let sum = 0;
  for (const feed of feeds.value.values()) sum += feed.unreadCount;
  return sum;
});

export function groupUnread(group: Group): number {
  const map = feeds.value;
  return group.feedIds.reduce((sum, id) => sum + (map.get(id)?.unreadCount ?? 0), 0);
}

export async function loadFeeds(): Promise<void> {
  try {
    const data = await query(ReaderGroupsDocument, {});
    const map = new Map<string, Feed>();
    const list: Group[] = data.groups.map(({ feeds: groupFeeds, ...group }) => {
      for (const feed of groupFeeds) map.set(feed.id, feed);
      return { ...group, feedIds: groupFeeds.map((feed) => feed.id) };
    });
    batch(() => {
      groups.value = list;
      feeds.value = map;
      serverSettings.value = data.settings;
      feedsState.value = 'ready';
    });
  } catch (error) {
    if (feedsState.value === 'loading') feedsState.value = error as ApiError;
  }
}

/** Replaces one feed (after a pull, an edit), keeping the others' objects. */
export function putFeed(feed: Feed): void {
  const map = new Map(feeds.value);
  const before = map.get(feed.id);
  map.set(feed.id, feed);
  feeds.value = map;
  const groupId = feed.group?.id;
  if (groupId && before?.group?.id !== groupId) {
    groups.value = groups.value.map((group) => ({
      ...group,
      feedIds:
        group.id === groupId
          ? [...group.feedIds.filter((id) => id !== feed.id), feed.id]
          : group.feedIds.filter((id) => id !== feed.id),
    }));
  }
}

function adjustUnread(feedId: string, delta: number): void {
  const feed = feeds.value.get(feedId);
  if (!feed || delta === 0) return;
  putFeed({ ...feed, unreadCount: Math.max(0, feed.unreadCount + delta) });
}

// ---- the list ------------------------------------------------------------------

export const scope = signal<Scope>({ kind: 'all' });
export const show = signal<Show>('unread');
export const items = signal<ListItem[]>([]);
export const listState = signal<'idle' | 'loading' | 'more' | 'ready' | ApiError>('idle');
export const totalCount = signal(0);
export const selectedId = signal<string | null>(null);
/** New items announced by `feedUpdated` for this scope since the list loaded. */
export const newSinceLoad = signal(0);

let cursor: string | null = null;
let hasMore = false;
let generation = 0;
/** Arrival time (`createdAt`) of the newest item this list has shown. */
let newestShown: string | null = null;

/** What the reader changes on an item: its read and starred state, and where it links. */
export type Marks = Pick<ListItem, 'id' | 'feedId' | 'link' | 'unread' | 'starred'>;

/**
 * The article open in the pane. The list usually holds it too, but not
 * always: a reload while offline reads the article from this device while
 * the list cannot load, and it must still be starred and marked.
 */
export const openArticle = signal<Marks | null>(null);

/** An item's state as shown: the list's, else the open article's. */
export function marksOf(id: string): Marks | null {
  return items.value.find((item) => item.id === id) ?? (openArticle.value?.id === id ? openArticle.value : null);
}

export const selectedIndex = computed(() => {
  const id = selectedId.value;
  return id === null ? -1 : items.value.findIndex((item) => item.id === id);
});

export function filterFor(current: Scope, which: Show): ItemFilter {
  const filter: ItemFilter = {};
  if (current.kind === 'feed') filter.feedId = current.id;
  if (current.kind === 'group') filter.groupId = current.id;
  if (current.kind === 'starred') filter.starred = true;
  if (current.kind === 'search') Object.assign(filter, parseSearch(current.query ?? ''));
  if (which === 'unread' && current.kind !== 'starred' && current.kind !== 'search') filter.unread = true;
  return filter;
}

/**
 * Search operators: `is:unread`, `is:read`, `is:starred`, `feed:<name>`,
 * `group:<name>` (names as prefixes, case-insensitive); the rest is full-text.
 */
export function parseSearch(text: string, known = { feeds: [...feeds.value.values()], groups: groups.value }): ItemFilter {
  const filter: ItemFilter = {};
  const words: string[] = [];
  for (const token of text.match(/(?:[^\s"]+|"[^"]*")+/g) ?? []) {
    const [op, ...restParts] = token.split(':');
    const rest = restParts.join(':').replace(/^"|"$/g, '').toLowerCase();
    if (restParts.length && op === 'is' && rest === 'unread') filter.unread = true;
    else if (restParts.length && op === 'is' && rest === 'read') filter.unread = false;
    else if (restParts.length && op === 'is' && rest === 'starred') filter.starred = true;
    else if (restParts.length && op === 'feed' && rest) {
      const feed = known.feeds.find((candidate) => candidate.name.toLowerCase().startsWith(rest));
      filter.feedId = feed?.id ?? '0';
    } else if (restParts.length && op === 'group' && rest) {
      const group = known.groups.find((candidate) => candidate.name.toLowerCase().startsWith(rest));
      filter.groupId = group?.id ?? '0';
    } else words.push(token);
  }
  const rest = words.join(' ').trim();
  if (rest) filter.query = rest;
  return filter;
}

export async function loadList(next: Scope = scope.value, which: Show = show.value): Promise<void> {
  const mine = ++generation;
  batch(() => {
    scope.value = next;
    show.value = which;
    listState.value = 'loading';
    newSinceLoad.value = 0;
  });
  cursor = null;
  hasMore = false;
  newestShown = null;
  try {
    const data = await query(ReaderItemsDocument, { filter: filterFor(next, which), first: PAGE });
    if (mine !== generation) return;
    const page = data.items;
    cursor = page.pageInfo.endCursor ?? null;
    hasMore = page.pageInfo.hasNextPage;
    noteShown(page.nodes);
    batch(() => {
      items.value = page.nodes;
      totalCount.value = page.totalCount;
      listState.value = 'ready';
    });
  } catch (error) {
    if (mine === generation) listState.value = error as ApiError;
  }
}

export async function loadMore(): Promise<void> {
  if (!hasMore || listState.value !== 'ready') return;
  const mine = generation;
  listState.value = 'more';
  try {
    const data = await query(ReaderItemsDocument, {
      filter: filterFor(scope.value, show.value),
      first: PAGE,
      after: cursor,
    });
    if (mine !== generation) return;
    const page = data.items;
    cursor = page.pageInfo.endCursor ?? null;
    hasMore = page.pageInfo.hasNextPage;
    noteShown(page.nodes);
    const seen = new Set(items.value.map((item) => item.id));
    batch(() => {
      items.value = [...items.value, ...page.nodes.filter((item) => !seen.has(item.id))];
      listState.value = 'ready';
    });
  } catch (error) {
    if (mine === generation) {
      listState.value = 'ready';
      toast(`Could not load more: ${(error as Error).message}`);
    }
  }
}

export function canLoadMore(): boolean {
  return hasMore;
}

function noteShown(list: readonly ListItem[]): void {
  for (const item of list) {
    if (newestShown === null || item.createdAt > newestShown) newestShown = item.createdAt;
  }
}

// ---- changes -------------------------------------------------------------------

export const changes = new ChangeQueue(typeof localStorage === 'undefined' ? null : localStorage);
export const pendingChanges = signal(changes.size);
changes.onChange((size) => {
  pendingChanges.value = size;
});

const SENDERS = {
  read: MarkReadDocument,
  unread: MarkUnreadDocument,
  star: StarDocument,
  unstar: UnstarDocument,
} as const;

async function send(kind: ChangeKind, ids: string[]): Promise<void> {
  try {
    // Four mutations of one shape: `(ids: [ID!]!) -> Int!`.
    await mutate(SENDERS[kind] as typeof MarkReadDocument, { ids });
  } catch (error) {
    // Only a change that never reached the server is kept for later;
    // one the server refused (a deleted item) is dropped.
    if (error instanceof ApiError && error.network) throw error;
  }
}

export function flushChanges(): Promise<boolean> {
  return changes.flush(send);
}

/** Applies a change to the list, the open article and its offline copy; the items as they were. */
function patchItems(ids: ReadonlySet<string>, patch: Pick<Partial<Marks>, 'unread' | 'starred'>): Marks[] {
  const changed: Marks[] = [];
  items.value = items.value.map((item) => {
    if (!ids.has(item.id)) return item;
    changed.push(item);
    return { ...item, ...patch };
  });
  const open = openArticle.value;
  if (open && ids.has(open.id)) {
    if (!changed.some((item) => item.id === open.id)) changed.push(open);
    openArticle.value = { ...open, ...patch };
  }
  void updateStoredArticles([...ids], patch);
  return changed;
}

/** Marks items read or unread at once here, and on the server when it can be reached. */
export function setRead(ids: readonly string[], read: boolean): void {
  const set = new Set(ids);
  const before = patchItems(set, { unread: !read });
  for (const item of before) {
    if (item.unread === read) adjustUnread(item.feedId, read ? -1 : 1);
  }
  changes.add(read ? 'read' : 'unread', ids);
  void flushChanges();
}

export function setStarred(ids: readonly string[], starred: boolean): void {
  patchItems(new Set(ids), { starred });
  changes.add(starred ? 'star' : 'unstar', ids);
  void flushChanges();
}

export function markAbove(index: number): void {
  setRead(
    items.value.slice(0, index).filter((item) => item.unread).map((item) => item.id),
    true,
  );
}

export function markBelow(index: number): void {
  setRead(
    items.value.slice(index + 1).filter((item) => item.unread).map((item) => item.id),
    true,
  );
}

/**
 * Marks the scope read on the server, up to the newest item this list has
 * shown: items that arrived later stay unread.
 */
export async function markAllRead(): Promise<number> {
  const current = scope.value;
  const args =
    current.kind === 'feed'
      ? { feedId: current.id }
      : current.kind === 'group'
        ? { groupId: current.id }
        : current.kind === 'all'
          ? { all: true }
          : null;
  if (!args) return 0;
  const before = newestShown ?? new Date().toISOString();
  const data = await mutate(MarkAllReadDocument, { ...args, before });
  const shownIds = new Set(items.value.filter((item) => item.createdAt <= before).map((item) => item.id));
  patchItems(shownIds, { unread: false });
  await loadFeeds();
  return data.markAllRead;
}

// ---- live updates ----------------------------------------------------------------

function inScope(feedId: string): boolean {
  const current = scope.value;
  if (current.kind === 'all') return true;
  if (current.kind === 'feed') return current.id === feedId;
  if (current.kind === 'group') return groups.value.find((group) => group.id === current.id)?.feedIds.includes(feedId) ?? false;
  return false;
}

let live: (() => void) | null = null;

/** Follows `feedUpdated` (unread counts without reloads) while the reader is open. */
export function startLive(): () => void {
  if (live) return live;
  const stopFeed = subscribe(
    ReaderFeedUpdatedDocument,
    {},
    (data) => {
      const { feed, newItems } = data.feedUpdated;
      putFeed(feed);
      if (newItems > 0 && inScope(feed.id)) {
        // An empty list simply fills; a list being read is never reshuffled
        // under the reader: it offers the new items instead.
        if (items.value.length === 0 && listState.value === 'ready') void loadList();
        else newSinceLoad.value += newItems;
      }
    },
    (error) => {
      // Fell behind: re-read the counts rather than guess.
      if (error.code === 'EVENTS_LAGGED') void loadFeeds();
    },
  );
  const stopReconnect = onReconnect(() => {
    void loadFeeds();
    void flushChanges();
  });
  const online = () => void flushChanges();
  addEventListener('online', online);
  live = () => {
    stopFeed();
    stopReconnect();
    removeEventListener('online', online);
    live = null;
  };
  return live;
}
