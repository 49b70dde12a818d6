// The reader: sidebar (groups, feeds, live unread counts), the item list
// and the reading pane (a full-screen article on phones). The URL says
// what is shown: `/read/feed/42?item=7&show=all`.
import { useSignal } from '@preact/signals';
import { lazy, useLocation, useRoute } from 'preact-iso';
import { useCallback, useEffect, useMemo, useRef } from 'preact/hooks';
import { KeyMatcher, bindings, isTypingTarget, type Action } from '../keyboard/keymap';
import { prefs } from '../state/prefs';
import { Failed, Loading } from '../ui/states';
import { toast } from '../ui/toast';
import { IconBack, IconCheckAll, IconMenu, IconRefresh, IconSearch } from '../ui/icons';
import { ItemList } from './ItemList';
import { Sidebar } from './Sidebar';
import { mutate } from '../api/client';
import { BookmarkItemDocument, RefreshAllDocument, RefreshFeedDocument } from '../gql/graphql';
import {
  feeds,
  feedsState,
  groups,
  items,
  listState,
  loadFeeds,
  loadList,
  markAbove,
  markAllRead,
  markBelow,
  marksOf,
  newSinceLoad,
  scope,
  selectedId,
  selectedIndex,
  setRead,
  setStarred,
  startLive,
  totalCount,
  type Scope,
  type ScopeKind,
  type Show,
} from './store';

const Article = lazy(() => import('./Article').then((module) => module.Article));
// Dialogs load when first opened: the reader's first paint does not wait for them.
const Help = lazy(() => import('./Help').then((module) => module.Help));
const Palette = lazy(() => import('./Palette').then((module) => module.Palette));
const FeedDialog = lazy(() => import('./FeedDialog').then((module) => module.FeedDialog));

export function readerUrl(target: Scope, which: Show, item?: string | null): string {
  let path = '/read';
  if (target.kind === 'feed' || target.kind === 'group') path += `/${target.kind}/${target.id}`;
  else if (target.kind !== 'all') path += `/${target.kind}`;
  const params = new URLSearchParams();
  if (target.kind === 'search' && target.query) params.set('q', target.query);
  if (which === 'all' && target.kind !== 'starred' && target.kind !== 'search') params.set('show', 'all');
  if (item) params.set('item', item);
  const search = params.toString();
  return search ? `${path}?${search}` : path;
}

function scopeFrom(params: Record<string, string>, queryParams: Record<string, string>): Scope {
  const kind = (params.scope ?? 'all') as ScopeKind;
  if (kind === 'feed' || kind === 'group') return { kind, id: params.id };
  if (kind === 'search') return { kind, query: queryParams.q ?? '' };
  if (kind === 'starred') return { kind };
  return { kind: 'all' };
}

export function scopeTitle(current: Scope): string {
  switch (current.kind) {
    case 'feed':
      return feeds.value.get(current.id ?? '')?.name ?? 'Feed';
    case 'group':
      return groups.value.find((group) => group.id === current.id)?.name ?? 'Group';
    case 'starred':
      return 'Starred';
    case 'search':
      return `Search: ${current.query ?? ''}`;
    default:
      return 'All items';
  }
}

export function Reader() {
  const { route } = useLocation();
  const { params, query: queryParams } = useRoute();
  const current = useMemo(() => scopeFrom(params, queryParams), [params.scope, params.id, queryParams.q]);
  const which: Show = queryParams.show === 'all' ? 'all' : 'unread';
  const itemId = queryParams.item ?? null;
  const helpOpen = useSignal(false);
  const paletteOpen = useSignal(false);
  const feedDialog = useSignal<{ mode: 'add' } | { mode: 'edit'; id: string } | null>(null);
  const sidebarOpen = useSignal(false);
  const searchRef = useRef<HTMLInputElement>(null);
  const listRef = useRef<HTMLDivElement>(null);

  useEffect(() => {
    void loadFeeds();
    return startLive();
  }, []);

  useEffect(() => {
    void loadList(current, which);
  }, [current, which]);

  useEffect(() => {
    selectedId.value = itemId;
    sidebarOpen.value = false;
  }, [itemId]);

  const go = (target: Scope, nextShow: Show = which, item: string | null = null) =>
    route(readerUrl(target, nextShow, item));
  const open = (id: string | null) => {
    // The selection moves now; the URL follows in the same render.
    selectedId.value = id;
    route(readerUrl(current, which, id), true);
  };

  function move(step: 1 | -1, openIt: boolean) {
    const list = items.value;
    if (!list.length) return;
    const index = selectedIndex.value;
    const next = index < 0 ? (step > 0 ? 0 : list.length - 1) : Math.min(list.length - 1, Math.max(0, index + step));
    const item = list[next];
    if (openIt) open(item.id);
    else selectedId.value = item.id;
  }

  function selected() {
    return items.value[selectedIndex.value] ?? null;
  }

  async function run(action: Action) {
    // The open article even when the list does not hold it (offline).
    const item = selected() ?? (itemId ? marksOf(itemId) : null);
    switch (action) {
      case 'next':
        return move(1, true);
      case 'prev':
        return move(-1, true);
      case 'nextNoOpen':
        return move(1, false);
      case 'prevNoOpen':
        return move(-1, false);
      case 'openArticle':
        return item && open(item.id);
      case 'openOriginal':
        if (item?.link) window.open(item.link, '_blank', 'noopener,noreferrer');
        return;
      case 'toggleRead':
        return item && setRead([item.id], item.unread);
      case 'toggleStar':
        return item && setStarred([item.id], !item.starred);
      case 'bookmark':
        if (item) {
          try {
            await mutate(BookmarkItemDocument, { itemId: item.id });
            toast('Bookmarked: a snapshot is saved.');
          } catch (error) {
            toast(`Could not bookmark: ${(error as Error).message}`);
          }
        }
        return;
      case 'markAllRead':
        return confirmMarkAll();
      case 'markAboveRead':
        return selectedIndex.value >= 0 && markAbove(selectedIndex.value);
      case 'markBelowRead':
        return selectedIndex.value >= 0 && markBelow(selectedIndex.value);
      case 'refresh':
        return refresh();
      case 'goUnread':
        return go(current.kind === 'starred' || current.kind === 'search' ? { kind: 'all' } : current, 'unread');
      case 'goAll':
        return go({ kind: 'all' }, 'all');
      case 'goStarred':
        return go({ kind: 'starred' }, 'all');
      case 'search':
        searchRef.current?.focus();
        searchRef.current?.select();
        return;
      case 'palette':
        paletteOpen.value = true;
        return;
      case 'help':
        helpOpen.value = !helpOpen.value;
        return;
      case 'close':
        if (helpOpen.value) helpOpen.value = false;
        else if (itemId) open(null);
        return;
    }
  }

  async function confirmMarkAll() {
    const kind = current.kind;
    if (kind === 'starred' || kind === 'search') return;
    try {
      const count = await markAllRead();
      toast(`${count} marked read. Items that arrived since stay unread.`);
    } catch (error) {
      toast(`Could not mark read: ${(error as Error).message}`);
    }
  }

  async function refresh() {
    try {
      if (current.kind === 'feed' && current.id) await mutate(RefreshFeedDocument, { id: current.id });
      else await mutate(RefreshAllDocument, {});
      toast('Refreshing: new items appear as they arrive.');
    } catch (error) {
      toast(`Could not refresh: ${(error as Error).message}`);
    }
  }

  // Keyboard: the reader's keys, never while typing or in a dialog.
  const runRef = useRef(run);
  runRef.current = run;
  useEffect(() => {
    const matcher = new KeyMatcher(bindings(prefs.value.keys));
    const onKey = (event: KeyboardEvent) => {
      matcher.setBindings(bindings(prefs.value.keys));
      const modal = document.querySelector('dialog[open], .palette');
      const mod = event.metaKey || event.ctrlKey;
      if (isTypingTarget(event.target) && !(mod && event.key.toLowerCase() === 'k') && event.key !== 'Escape') return;
      if (modal && !(mod && event.key.toLowerCase() === 'k')) return;
      const action = matcher.press(event);
      if (action === 'pending') {
        event.preventDefault();
        return;
      }
      if (!action) return;
      if (action === 'close' && isTypingTarget(event.target)) {
        (event.target as HTMLElement).blur();
        return;
      }
      event.preventDefault();
      void runRef.current(action);
    };
    addEventListener('keydown', onKey);
    return () => removeEventListener('keydown', onKey);
  }, []);

  // One function for the life of the page: the list (memo) is not re-rendered
  // because the reader re-rendered for the article pane or the URL.
  const openRef = useRef(open);
  openRef.current = open;
  const onOpen = useCallback((id: string) => openRef.current(id), []);
  const onAdd = useCallback(() => (feedDialog.value = { mode: 'add' }), []);
  const onEdit = useCallback((id: string) => (feedDialog.value = { mode: 'edit', id }), []);
  const state = feedsState.value;
  const canMarkAll = current.kind !== 'starred' && current.kind !== 'search';
  const classes = ['reader', itemId ? 'has-article' : '', sidebarOpen.value ? 'show-sidebar' : ''].join(' ');

  return (
    <div class={classes}>
      <Sidebar current={current} which={which} onAdd={onAdd} onEdit={onEdit} />
      <section class="list" aria-label="Articles">
        <div class="toolbar">
          <button type="button" class="btn ghost icon only-phone" aria-label="Feeds" onClick={() => (sidebarOpen.value = !sidebarOpen.value)}>
            <IconMenu />
          </button>
          <div class="grow">
            <h1>{scopeTitle(current)}</h1>
          </div>
          {current.kind !== 'starred' && current.kind !== 'search' && (
            <div class="tabs" role="group" aria-label="Show">
              <a href={readerUrl(current, 'unread')} aria-current={which === 'unread' ? 'page' : undefined}>
                Unread
              </a>
              <a href={readerUrl(current, 'all')} aria-current={which === 'all' ? 'page' : undefined}>
                All
              </a>
            </div>
          )}
          <button type="button" class="btn ghost icon" aria-label="Refresh" title="Refresh (r)" onClick={refresh}>
            <IconRefresh />
          </button>
          {canMarkAll && (
            <button type="button" class="btn ghost icon" aria-label="Mark all read" title="Mark all read (A)" onClick={confirmMarkAll}>
              <IconCheckAll />
            </button>
          )}
        </div>
        <form
          class="toolbar"
          role="search"
          onSubmit={(event) => {
            event.preventDefault();
            const text = searchRef.current?.value.trim() ?? '';
            if (text) go({ kind: 'search', query: text }, 'all');
            searchRef.current?.blur();
            listRef.current?.focus();
          }}
        >
          <label class="search-box">
            <IconSearch size={14} />
            <span class="sr-only">Search articles</span>
            <input
              ref={searchRef}
              class="input"
              type="search"
              name="q"
              placeholder="Search  (/ or ⌘K)  is:unread feed:name"
              defaultValue={current.kind === 'search' ? current.query : ''}
              key={current.kind === 'search' ? current.query : 'none'}
            />
          </label>
          <span class="badge" aria-label={`${totalCount.value} articles`}>
            {totalCount.value}
          </span>
        </form>
        {newSinceLoad.value > 0 && (
          <button type="button" class="btn small" onClick={() => void loadList(current, which)}>
            {newSinceLoad.value} new — show
          </button>
        )}
        {state === 'loading' && listState.value === 'loading' ? (
          <Loading label="Loading your feeds…" />
        ) : state instanceof Error ? (
          <Failed error={state} retry={() => void loadFeeds()} />
        ) : (
          <ItemList listRef={listRef} onOpen={onOpen} current={current} which={which} />
        )}
      </section>
      <section class="article" aria-label="Article">
        {itemId ? (
          <>
            <div class="toolbar article-bar only-phone">
              <button type="button" class="btn ghost back-btn" onClick={() => open(null)}>
                <IconBack /> Back
              </button>
            </div>
            <Article id={itemId} onNext={() => move(1, true)} onPrev={() => move(-1, true)} />
          </>
        ) : (
          <div class="empty-pane hide-phone">
            <div>
              <p>Select an article, or press <kbd>j</kbd> to start reading.</p>
              <p>
                <kbd>?</kbd> shows every key.
              </p>
            </div>
          </div>
        )}
      </section>
      {helpOpen.value && <Help onClose={() => (helpOpen.value = false)} />}
      {paletteOpen.value && (
        <Palette
          onClose={() => (paletteOpen.value = false)}
          onOpenItem={(feedId, id) => route(readerUrl({ kind: 'feed', id: feedId }, 'all', id))}
          onGo={(url) => route(url)}
          onSearch={(text) => go({ kind: 'search', query: text }, 'all')}
        />
      )}
      {feedDialog.value && (
        <FeedDialog
          mode={feedDialog.value}
          onClose={() => (feedDialog.value = null)}
          onDone={(feedId) => {
            feedDialog.value = null;
            if (feedId) go({ kind: 'feed', id: feedId }, 'all');
          }}
        />
      )}
      <span class="sr-only" aria-live="polite">
        {scope.value.kind === current.kind && listState.value === 'ready' ? `${totalCount.value} articles` : ''}
      </span>
    </div>
  );
}
