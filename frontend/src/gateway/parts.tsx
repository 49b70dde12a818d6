// Small pieces the gateway's sections share.
import type { ComponentChildren } from 'preact';
import type { StatusLook } from './labels';

export { Notice, type NoticeState } from '../ui/notice';

/** The foot of a paged list: how many are shown, and a button for more. */
export function ListMore({ shown, total, hasMore, loading, label, onMore }: {
  shown: number;
  total: number;
  hasMore: boolean;
  loading: boolean;
  label: string;
  onMore: () => void;
}) {
  return (
    <p class="row list-more">
      <span class="hint">
        {shown} of {total}
      </span>
      {hasMore && (
        <button type="button" class="btn" disabled={loading} onClick={onMore}>
          {loading ? 'Loading…' : label}
        </button>
      )}
    </p>
  );
}

/** A moment, in the reader's locale, with the exact time for machines. */
export function When({ at }: { at: string | null | undefined }) {
  if (!at) return <>—</>;
  const date = new Date(at);
  if (Number.isNaN(date.getTime())) return <>{at}</>;
  return <time dateTime={at}>{date.toLocaleString()}</time>;
}

export interface Paged<T> {
  nodes: T[];
  hasNextPage: boolean;
  endCursor: string | null;
  totalCount: number;
}

/** A status by label and colour; its meaning on hover and in the label's words. */
export function StatusPill({ look }: { look: StatusLook }) {
  return (
    <span class={look.level === null ? 'status own' : 'status'} data-level={look.level ?? undefined} title={look.meaning}>
      {look.label}
    </span>
  );
}

/**
 * A wide table's own horizontal scroll box (phones). Focusable and named,
 * so a keyboard can scroll it even when the table holds no control.
 */
export function TableScroll({ label, children }: { label: string; children: ComponentChildren }) {
  return (
    <div class="table-scroll" role="region" aria-label={label} tabIndex={0}>
      {children}
    </div>
  );
}
