// Lists shown page by page: a connection's pages appended in order
// (`after` the last cursor), and the list's foot with how many are shown
// and a button for more.
import { useSignal } from '@preact/signals';
import { useRef } from 'preact/hooks';
import { errorText } from './states';

/** What a GraphQL connection answers (`totalCount` where the API has it). */
export interface Connection<T> {
  nodes: T[];
  pageInfo: { hasNextPage: boolean; endCursor?: string | null };
  totalCount?: number;
}

export interface Pages<T> {
  nodes: T[];
  hasNextPage: boolean;
  endCursor: string | null;
  /** Across all pages; null when the API does not count. */
  totalCount: number | null;
}

/** A first page (no `before`) or the next one appended to what is shown. */
export function appendPage<T>(found: Connection<T>, before?: Pages<T> | null): Pages<T> {
  return {
    nodes: before ? [...before.nodes, ...found.nodes] : found.nodes,
    hasNextPage: found.pageInfo.hasNextPage,
    endCursor: found.pageInfo.endCursor ?? null,
    totalCount: found.totalCount ?? null,
  };
}

/**
 * A paged list's state: `load` fetches the first page (replacing what is
 * shown), `more` the next one after the last cursor (appended). The fetch
 * is read when called, so it may close over the latest input.
 */
export function usePages<T>(fetchPage: (after: string | null) => Promise<Connection<T>>) {
  const pages = useSignal<Pages<T> | null>(null);
  const error = useSignal<unknown>(null);
  const moreError = useSignal<unknown>(null);
  const loading = useSignal(false);
  const fetcher = useRef(fetchPage);
  fetcher.current = fetchPage;
  /** Each load gets a number: an older answer arriving late is dropped. */
  const turn = useRef(0);

  const load = async () => {
    const mine = ++turn.current;
    try {
      const found = await fetcher.current(null);
      if (mine !== turn.current) return;
      pages.value = appendPage(found);
      error.value = null;
      moreError.value = null;
    } catch (caught) {
      if (mine === turn.current) error.value = caught;
    }
  };

  const more = async () => {
    const current = pages.value;
    if (!current?.hasNextPage || !current.endCursor || loading.value) return;
    const mine = turn.current;
    loading.value = true;
    try {
      const found = await fetcher.current(current.endCursor);
      if (mine !== turn.current) return;
      pages.value = appendPage(found, current);
      moreError.value = null;
    } catch (caught) {
      moreError.value = caught;
    } finally {
      loading.value = false;
    }
  };

  const clear = () => {
    turn.current += 1;
    pages.value = null;
    error.value = null;
    moreError.value = null;
  };

  return { pages, error, moreError, loading, load, more, clear };
}

/** The foot of a paged list: how many are shown (of how many, when known), and a button for more. */
export function ListMore({ shown, total, hasMore, loading, label, onMore }: {
  shown: number;
  total?: number | null;
  hasMore: boolean;
  loading: boolean;
  label: string;
  onMore: () => void;
}) {
  return (
    <p class="row list-more">
      <span class="hint">{total === null || total === undefined ? `${shown} shown` : `${shown} of ${total}`}</span>
      {hasMore && (
        <button type="button" class="btn" disabled={loading} onClick={onMore}>
          {loading ? 'Loading…' : label}
        </button>
      )}
    </p>
  );
}

export type PagedList<T> = ReturnType<typeof usePages<T>>;

/** A paged list's foot, with the error of a failed "more" in words. */
export function PagesFoot<T>({ list, label }: { list: PagedList<T>; label: string }) {
  const found = list.pages.value;
  if (!found) return null;
  return (
    <>
      <ListMore shown={found.nodes.length} total={found.totalCount} hasMore={found.hasNextPage} loading={list.loading.value} label={label} onMore={() => void list.more()} />
      {list.moreError.value ? (
        <p class="alert error" role="alert">
          {errorText(list.moreError.value)}
        </p>
      ) : null}
    </>
  );
}
