// Small pieces the gateway's sections share.
import type { ComponentChildren } from 'preact';
import type { StatusLook } from './labels';

export { Notice, type NoticeState } from '../ui/notice';
export { ListMore } from '../ui/paging';
export { When } from '../ui/when';

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
